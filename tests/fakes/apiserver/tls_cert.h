#pragma once
// A throwaway self-signed certificate for the double's HTTPS listener.

#include <string>

#include "vgpu/result.h"

namespace vgpu::fakes::detail {

struct CertAndKey {
  std::string certPem;
  std::string keyPem;
};

/// EC P-256, valid for a day, SANs localhost, 127.0.0.1 and ::1, usable as its own CA.
Result<CertAndKey> makeSelfSignedCert();

}  // namespace vgpu::fakes::detail
