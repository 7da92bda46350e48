#pragma once
// Appending JSON text to a string by hand, for the extender's large answers (thousands of
// node names), where building a boost::json::value first would cost more than the answer.

#include <string>
#include <string_view>

namespace vgpu::scheduler {

/// Appends `text` as a JSON string literal. Quotes, backslashes and control characters are
/// escaped; other bytes (UTF-8) are copied, so `text` must be valid UTF-8, as everything
/// parsed from a request is.
void appendJsonString(std::string& out, std::string_view text);

/// `text` with every '%' written as the word "percent" ("30%" becomes "30 percent").
/// kube-scheduler uses an extender's Error and the reasons in FailedNodes as printf formats
/// (extender.go fmt.Errorf(result.Error); schedule_one.go Eventf(..., msg) for the pod's
/// FailedScheduling event), where "30% compute" comes out as "30%!c(MISSING)ompute".
/// Everything the extender answers passes through here, whatever a backend or the
/// apiserver put in its words.
std::string printfSafe(std::string_view text);

/// `{"Error":"<printfSafe(error)>"}`: the answer of bind, and of any verb refused outright.
std::string errorAnswer(std::string_view error);

}  // namespace vgpu::scheduler
