// The extender's own JSON reading and writing, checked against Boost.JSON's full parse.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "extender_args.h"
#include "filter_result.h"
#include "json_writer.h"

namespace vgpu::scheduler {
namespace {

namespace json = boost::json;

json::value fullParse(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  EXPECT_FALSE(ec) << ec.message() << "\n" << text;
  return v;
}

std::vector<std::string> asStrings(const std::vector<std::string_view>& views) { return {views.begin(), views.end()}; }

const json::object kPod{{"metadata", json::object{{"name", "p"}, {"namespace", "default"}}},
                        {"spec", json::object{{"containers", json::array{json::object{{"name", "c"}}}}}}};

TEST(SchedulerExtenderArgs, NodeNamesAndPodMatchBoostsFullParse) {
  const std::vector<std::string> names{"node-0", "", "we\"ird", "back\\slash", "tab\there", "ünïcode-é", "ctl\x01"};
  json::array list;
  for (const auto& n : names) list.emplace_back(n);
  const std::string body = json::serialize(json::object{{"Pod", kPod}, {"Nodes", nullptr}, {"NodeNames", list}});

  json::monotonic_resource arena;
  auto args = parseExtenderArgs(body, &arena);
  ASSERT_TRUE(args.ok()) << args.error().message;
  EXPECT_TRUE(args->cacheCapable);
  const json::object reference = fullParse(body).as_object();
  EXPECT_EQ(args->pod, reference.at("Pod"));
  std::vector<std::string> expected;
  for (const auto& n : reference.at("NodeNames").as_array()) expected.emplace_back(n.as_string());
  EXPECT_EQ(asStrings(args->names), expected);
  EXPECT_EQ(asStrings(args->names), names);
}

TEST(SchedulerExtenderArgs, PlainNamesAreViewsIntoTheBodyEscapedOnesAreCopies) {
  const std::string body = R"({"Pod":{},"NodeNames":["plain","a\u0062c","x\"y"]})";
  auto args = parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.error().message;
  EXPECT_EQ(asStrings(args->names), (std::vector<std::string>{"plain", "abc", "x\"y"}));
  EXPECT_EQ(args->names[0].data(), body.data() + body.find("plain"));
  EXPECT_EQ(args->unescaped.size(), 2u);
}

TEST(SchedulerExtenderArgs, AnEscapedNameLongerThanTheParsersBufferArrivesWhole) {
  std::string name(10000, 'n');
  name[5000] = '"';
  name[9000] = '\\';
  const std::string body =
      json::serialize(json::object{{"Pod", json::object{}}, {"NodeNames", json::array{name, "b"}}});
  auto args = parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.error().message;
  EXPECT_EQ(asStrings(args->names), (std::vector<std::string>{name, "b"}));
}

TEST(SchedulerExtenderArgs, OnlyTheTopLevelNodeNamesAreCandidatesAndTheLastOneCounts) {
  const std::string body =
      R"({"NodeNames":["old"],"Pod":{"NodeNames":["inside"],"x":[1,[2]]},"NodeNames":["a","b"],"Other":[["c"]]})";
  auto args = parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.error().message;
  EXPECT_EQ(asStrings(args->names), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(args->pod, fullParse(R"({"NodeNames":["inside"],"x":[1,[2]]})"));
}

TEST(SchedulerExtenderArgs, SpacingAndEscapedKeysAreReadAsBoostReadsThem) {
  // Whitespace wherever JSON allows it, a key spelled with an escape, members in any order.
  const std::string body = " \r\n{ \"Other\" : [ 1 , { \"NodeNames\" : [ \"x\" ] } ] ,\t\"Pod\"\n:\n{\"a\" : 1.5e3 } ,"
                           " \"Node\\u004eames\" :\n[ \"a\" ,\"b\\u0063\" ,  \"\" ] , \"\" : null }\n ";
  auto args = parseExtenderArgs(body);
  ASSERT_TRUE(args.ok()) << args.error().message;
  const json::object reference = fullParse(body).as_object();
  EXPECT_TRUE(args->cacheCapable);
  EXPECT_EQ(args->pod, reference.at("Pod"));
  std::vector<std::string> expected;
  for (const auto& n : reference.at("NodeNames").as_array()) expected.emplace_back(n.as_string());
  EXPECT_EQ(asStrings(args->names), expected);
}

TEST(SchedulerExtenderArgs, NodesItemsWithoutNodeCacheCapable) {
  const json::object a{{"metadata", json::object{{"name", "a"}}}, {"status", json::object{}}};
  const json::object b{{"metadata", json::object{{"name", "b\"q"}}}};
  const std::string body = json::serialize(
      json::object{{"Pod", kPod}, {"Nodes", json::object{{"items", json::array{a, b}}}}, {"NodeNames", nullptr}});
  json::monotonic_resource arena;
  auto args = parseExtenderArgs(body, &arena);
  ASSERT_TRUE(args.ok()) << args.error().message;
  EXPECT_FALSE(args->cacheCapable);
  EXPECT_EQ(asStrings(args->names), (std::vector<std::string>{"a", "b\"q"}));
  EXPECT_EQ(args->nodes, (json::array{a, b}));
  // Nodes with items null (or none): no candidates, not an error.
  auto empty = parseExtenderArgs(R"({"Pod":{},"Nodes":{"items":null}})");
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_TRUE(empty->names.empty());
}

TEST(SchedulerExtenderArgs, MalformedInputIsRefusedInWords) {
  struct Case {
    const char* description;
    std::string body;
    const char* expected;  // part of the error
  } cases[] = {
      {"not JSON", "{nope", "not JSON"},
      {"empty body", "", "not JSON"},
      {"cut short", R"({"Pod":{},"NodeNames":["a",)", "not JSON"},
      {"trailing garbage", R"({"Pod":{},"NodeNames":[]} x)", "not JSON"},
      {"invalid UTF-8 in a name", "{\"Pod\":{},\"NodeNames\":[\"\xff\"]}", "not JSON"},
      {"an array", "[1,2]", "not a JSON object"},
      {"no Pod", R"({"NodeNames":["a"]})", "no Pod object"},
      {"Pod not an object", R"({"Pod":"x","NodeNames":[]})", "no Pod object"},
      {"NodeNames of numbers", R"({"Pod":{},"NodeNames":[1]})", "NodeNames must be an array of strings"},
      {"NodeNames with null", R"({"Pod":{},"NodeNames":["a",null]})", "NodeNames must be an array of strings"},
      {"NodeNames nested", R"({"Pod":{},"NodeNames":[["a"]]})", "NodeNames must be an array of strings"},
      {"NodeNames with an object", R"({"Pod":{},"NodeNames":[{}]})", "NodeNames must be an array of strings"},
      {"no node list", R"({"Pod":{}})", "needs NodeNames"},
      {"NodeNames not a list", R"({"Pod":{},"NodeNames":"a"})", "needs NodeNames"},
      {"items of strings", R"({"Pod":{},"Nodes":{"items":["a"]}})", "must hold Node objects"},
      {"a node without a name", R"({"Pod":{},"Nodes":{"items":[{"metadata":{}}]}})", "no metadata.name"},
      {"nested too deep", std::string(100000, '[') + std::string(100000, ']'), "not JSON"},
      {"Pod nested too deep", R"({"Pod":)" + std::string(200, '[') + std::string(200, ']') + "}", "not JSON"},
      {"a control byte in a name", "{\"Pod\":{},\"NodeNames\":[\"a\x01\"]}", "not JSON"},
      {"a key without quotes", R"({Pod:{},"NodeNames":[]})", "not JSON"},
      {"no colon", R"({"Pod" {},"NodeNames":[]})", "not JSON"},
      {"two members without a comma", R"({"Pod":{} "NodeNames":[]})", "not JSON"},
      {"names without a comma", R"({"Pod":{},"NodeNames":["a" "b"]})", "not JSON"},
      {"a name cut short", R"({"Pod":{},"NodeNames":["a)", "not JSON"},
      {"a key cut short", R"({"Po)", "not JSON"},
      {"a trailing comma", R"({"Pod":{},"NodeNames":["a",]})", "not JSON"},
      {"nothing after the key", R"({"Pod":)", "not JSON"},
  };
  for (const auto& c : cases) {
    auto args = parseExtenderArgs(c.body);
    ASSERT_FALSE(args.ok()) << c.description;
    EXPECT_NE(args.error().message.find(c.expected), std::string::npos)
        << c.description << ": " << args.error().message;
  }
}

TEST(SchedulerJsonWriter, EveryEscapeRoundTripsThroughBoost) {
  std::string text;
  for (int c = 1; c < 0x80; ++c) text += static_cast<char>(c);
  text += "ünïcode ✓";
  text += '\0';
  std::string out;
  appendJsonString(out, text);
  EXPECT_EQ(fullParse(out).as_string(), text);
  out.clear();
  appendJsonString(out, "node-1.example.com");
  EXPECT_EQ(out, "\"node-1.example.com\"");
}

/// `body` must outlive the result: its names are views into it.
ExtenderArgs namesArgs(const std::string& body) {
  auto args = parseExtenderArgs(body);
  EXPECT_TRUE(args.ok()) << args.error().message;
  return std::move(args).value();
}

TEST(SchedulerFilterResult, AnswerRoundTripsWithEscapesAndSharedReasons) {
  const std::string body = R"({"Pod":{},"NodeNames":["fit","full-1","full-2","q\"uote","gone"]})";
  ExtenderArgs args = namesArgs(body);
  FilterResult result(args.names.size());
  result.pass(0);
  const auto full = result.reason("not enough \"free\" memory\n(8000 MiB)");
  EXPECT_EQ(result.reason("not enough \"free\" memory\n(8000 MiB)"), full);
  const auto gone = result.reason("no devices");
  EXPECT_NE(gone, full);
  result.fail(1, full, false);
  result.fail(2, full, false);
  result.pass(3);
  result.fail(4, gone, true);

  const json::object out = fullParse(result.toJson(args)).as_object();
  EXPECT_TRUE(out.at("Nodes").is_null());
  EXPECT_EQ(out.at("NodeNames"), (json::array{"fit", "q\"uote"}));
  EXPECT_EQ(out.at("FailedNodes"),
            (json::object{{"full-1", result.reasonText(full)}, {"full-2", result.reasonText(full)}}));
  EXPECT_EQ(out.at("FailedAndUnresolvableNodes"), (json::object{{"gone", "no devices"}}));
  EXPECT_EQ(out.at("Error"), "");
  EXPECT_EQ(result.summary(5), "2/5 nodes can take the pod: 2 " + result.reasonText(full) + ", 1 no devices");
}

TEST(SchedulerFilterResult, PassingNeighboursAreCopiedFromTheRequestWithItsSpacing) {
  const std::string body = "{\"Pod\":{},\"NodeNames\":[ \"a\" ,\n\"b\",\"c\\u0064\", \"e\" ,\t\"f\", \"g\"]}";
  ExtenderArgs args = namesArgs(body);
  const std::vector<std::string> all{"a", "b", "cd", "e", "f", "g"};
  ASSERT_EQ(asStrings(args.names), all);
  // Every subset of the six: runs, gaps, and the escaped name inside and at the ends of runs.
  for (unsigned mask = 0; mask < (1u << all.size()); ++mask) {
    FilterResult result(all.size());
    json::array expected;
    for (std::uint32_t i = 0; i < all.size(); ++i) {
      if (mask & (1u << i)) {
        result.pass(i);
        expected.emplace_back(all[i]);
      } else {
        result.fail(i, result.reason("full"), false);
      }
    }
    const json::object out = fullParse(result.toJson(args)).as_object();
    EXPECT_EQ(out.at("NodeNames"), expected) << "mask " << mask;
    EXPECT_EQ(out.at("FailedNodes").as_object().size(), all.size() - expected.size()) << "mask " << mask;
  }
}

TEST(SchedulerFilterResult, RefusedNamesThatNeedEscapesAreWrittenEscaped) {
  // Names that are not views into the body are written anew, some longer than their text
  // plus quotes: the answer's room grows for them.
  const std::string body = R"({"Pod":{},"NodeNames":["a","q\"uo\"te","b","back\\slash","\u00e9t\u00e9","c"]})";
  ExtenderArgs args = namesArgs(body);
  const std::vector<std::string> all{"a", "q\"uo\"te", "b", "back\\slash", "\u00e9t\u00e9", "c"};
  ASSERT_EQ(asStrings(args.names), all);
  FilterResult result(all.size());
  json::object failed, unresolvable;
  for (std::uint32_t i = 0; i < all.size(); ++i) {
    const bool lasting = i % 3 == 2;
    result.fail(i, result.reason(lasting ? "gone" : "full"), lasting);
    (lasting ? unresolvable : failed)[args.names[i]] = lasting ? "gone" : "full";
  }
  const json::object out = fullParse(result.toJson(args)).as_object();
  EXPECT_EQ(out.at("FailedNodes"), failed);
  EXPECT_EQ(out.at("FailedAndUnresolvableNodes"), unresolvable);
}

TEST(SchedulerFilterResult, NothingFitsIsAnEmptyArrayNotNull) {
  const std::string body = R"({"Pod":{},"NodeNames":["a"]})";
  ExtenderArgs args = namesArgs(body);
  FilterResult result(1);
  result.fail(0, result.reason("full"), false);
  const json::object out = fullParse(result.toJson(args)).as_object();
  EXPECT_EQ(out.at("NodeNames"), json::array{});
  EXPECT_EQ(result.summary(1), "0/1 nodes can take the pod: 1 full");
}

TEST(SchedulerFilterResult, WithoutNodeCacheCapableTheFittingNodeObjectsComeBack) {
  const json::object a{{"metadata", json::object{{"name", "a"}}}, {"spec", json::object{{"unschedulable", false}}}};
  const json::object b{{"metadata", json::object{{"name", "b"}}}};
  const std::string body =
      json::serialize(json::object{{"Pod", json::object{}}, {"Nodes", json::object{{"items", json::array{a, b}}}}});
  ExtenderArgs args = namesArgs(body);
  FilterResult result(2);
  result.fail(0, result.reason("full"), false);
  result.pass(1);
  const json::object out = fullParse(result.toJson(args)).as_object();
  EXPECT_EQ(out.at("Nodes").at("items"), json::array{b});
  EXPECT_TRUE(out.at("NodeNames").is_null());
  EXPECT_EQ(out.at("FailedNodes"), (json::object{{"a", "full"}}));
}

TEST(SchedulerJsonWriter, PercentSignsBecomeTheWordPercent) {
  struct Case {
    const char* in;
    const char* out;
  } cases[] = {
      {"needs 30%, 20% free", "needs 30 percent, 20 percent free"},
      {"(3000 MiB, 0% compute)", "(3000 MiB, 0 percent compute)"},
      {"100%", "100 percent"},
      {"% of it", "percent of it"},
      {"50%compute", "50 percent compute"},
      {"%d %s %!c(MISSING)", "percent d percent s percent!c(MISSING)"},
      {"no sign at all", "no sign at all"},
      {"", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(printfSafe(c.in), c.out) << c.in;
  EXPECT_EQ(fullParse(errorAnswer("quota 100% used \"now\"")), json::parse(R"({"Error":"quota 100 percent used \"now\""})"));
}

TEST(SchedulerFilterResult, ReasonsAndTheErrorAreWrittenWithoutPercentSigns) {
  const std::string body = json::serialize(json::object{{"Pod", kPod}, {"Nodes", nullptr}, {"NodeNames", json::array{"a", "b"}}});
  json::monotonic_resource arena;
  auto args = parseExtenderArgs(body, &arena);
  ASSERT_TRUE(args.ok());
  FilterResult result(2);
  result.fail(0, result.reason("needs 30% compute"), false);
  result.fail(1, result.reason("50% of the memory"), true);
  result.setError("100% wrong");
  const json::object out = fullParse(result.toJson(*args)).as_object();
  EXPECT_EQ(out.at("FailedNodes").at("a"), "needs 30 percent compute");
  EXPECT_EQ(out.at("FailedAndUnresolvableNodes").at("b"), "50 percent of the memory");
  EXPECT_EQ(out.at("Error"), "100 percent wrong");
}

}  // namespace
}  // namespace vgpu::scheduler
