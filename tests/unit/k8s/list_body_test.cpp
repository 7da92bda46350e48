// A list body read item by item (core/src/k8s/list_body.h): the items and the list's
// metadata as a whole-body parse sees them, and a clear error for each kind of bad body.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "list_body.h"

namespace vgpu::k8s::detail {
namespace {

namespace json = boost::json;

struct Read {
  std::vector<std::string> items;  // each item serialized
  std::string error;
  ListBodyMeta meta;
};

Read read(std::string_view body) {
  Read out;
  auto r = readListBody(body, [&](const json::object& item) { out.items.push_back(json::serialize(item)); });
  if (r) {
    out.meta = *r;
  } else {
    out.error = r.error().message;
  }
  return out;
}

TEST(K8sListBody, ReadsEachItemAsAWholeParseWouldWhereverTheMembersAre) {
  // Strings holding brackets, quotes, escapes and commas; nesting; metadata after the items.
  const std::string body = R"( {"kind":"PodList","apiVersion":"v1",
    "items":[ {"metadata":{"name":"a]}\"x","annotations":{"k":"{[,\\\"]}"}},"spec":{"n":[1,2.5e3,true,null,[{}]]}},
              {"metadata":{"name":"b\u00e9"}} ],
    "metadata":{"resourceVersion":"42","continue":"tok"}} )";
  auto r = read(body);
  ASSERT_EQ(r.error, "");
  const auto whole = json::parse(body).as_object().at("items").as_array();
  ASSERT_EQ(r.items.size(), 2u);
  EXPECT_EQ(r.items[0], json::serialize(whole[0]));
  EXPECT_EQ(r.items[1], json::serialize(whole[1]));
  EXPECT_EQ(r.meta.resourceVersion, "42");
  EXPECT_EQ(r.meta.continueToken, "tok");
}

TEST(K8sListBody, AnEmptyOrNullItemsListHasNoItems) {
  EXPECT_TRUE(read(R"({"metadata":{"resourceVersion":"7"},"items":[]})").items.empty());
  auto r = read(R"({"metadata":{"resourceVersion":"7"},"items":null})");
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.items.empty());
  EXPECT_EQ(r.meta.resourceVersion, "7");
}

TEST(K8sListBody, EachKindOfBadBodyIsNamed) {
  EXPECT_EQ(read("[]").error, "the list response is not a JSON object");
  EXPECT_EQ(read("").error, "the list response is not a JSON object");
  EXPECT_EQ(read(R"({"items":{}})").error, "the list response has no \"items\" array");
  EXPECT_EQ(read(R"({"items":[1]})").error, "the list response has a list item that is not an object");
  EXPECT_NE(read(R"({"items":[{"a":}]})").error.find("has an item that is not valid JSON"), std::string::npos);
  EXPECT_NE(read(R"({"items":[{"a":1})").error.find("not valid JSON"), std::string::npos);  // cut short
  EXPECT_NE(read(R"({"items":[{"a":"1)").error.find("not valid JSON"), std::string::npos);  // cut in a string
  EXPECT_NE(read(R"({"items":[] "kind":"x"})").error.find("expected ','"), std::string::npos);
}

}  // namespace
}  // namespace vgpu::k8s::detail
