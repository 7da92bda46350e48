#pragma once
// An HTTP answer's JSON body as an object, for assertions: a body that is not JSON fails the
// test (showing its start) and reads as an empty object.

#include <string>

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace vgpu::testing {

inline boost::json::object parse(const std::string& body) {
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  EXPECT_FALSE(ec) << body.substr(0, 200);
  return v.is_object() ? v.as_object() : boost::json::object{};
}

}  // namespace vgpu::testing
