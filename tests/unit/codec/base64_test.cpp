// Base64 as admission patches and kubeconfig files use it (RFC 4648 section 4).
#include <gtest/gtest.h>

#include "vgpu/codec/base64.h"

namespace vgpu {
namespace {

// The test vectors of RFC 4648 section 10.
const std::pair<std::string, std::string> kVectors[] = {
    {"", ""},
    {"f", "Zg=="},
    {"fo", "Zm8="},
    {"foo", "Zm9v"},
    {"foob", "Zm9vYg=="},
    {"fooba", "Zm9vYmE="},
    {"foobar", "Zm9vYmFy"},
};

TEST(Base64, EncodesAndDecodesTheRfcVectors) {
  for (const auto& [plain, encoded] : kVectors) {
    EXPECT_EQ(base64Encode(plain), encoded) << plain;
    auto decoded = base64Decode(encoded);
    ASSERT_TRUE(decoded.ok()) << encoded << ": " << decoded.error().message;
    EXPECT_EQ(*decoded, plain);
  }
}

TEST(Base64, RoundTripsEveryByteValue) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  for (std::size_t len = 0; len <= bytes.size(); len += 37) {
    const std::string part = bytes.substr(bytes.size() - len);
    auto decoded = base64Decode(base64Encode(part));
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    EXPECT_EQ(*decoded, part);
  }
  EXPECT_EQ(base64Encode("\xfb\xff"), "+/8=");
}

TEST(Base64, SkipsLineBreaksAsKubeconfigFilesHaveThem) {
  auto decoded = base64Decode(" Zm9v\nYmFy\r\n");
  ASSERT_TRUE(decoded.ok()) << decoded.error().message;
  EXPECT_EQ(*decoded, "foobar");
}

TEST(Base64, RefusesWhatIsNotBase64WithTheReason) {
  const std::pair<std::string, std::string> bad[] = {
      {"Zm9v!", "unexpected character '!' at position 4"},
      {"Zm-v", "unexpected character '-' at position 2"},  // base64url is not accepted
      {"Zg==Zg==", "data after the padding 'Z' at position 4"},
      {"Zm9", "3 characters, not padded to a multiple of 4"},
      {"Z===", "not padded"},
  };
  for (const auto& [text, reason] : bad) {
    auto decoded = base64Decode(text);
    ASSERT_FALSE(decoded.ok()) << text;
    EXPECT_NE(decoded.error().message.find(reason), std::string::npos) << text << ": " << decoded.error().message;
    EXPECT_EQ(decoded.error().message.rfind("not base64: ", 0), 0u) << decoded.error().message;
  }
}

}  // namespace
}  // namespace vgpu
