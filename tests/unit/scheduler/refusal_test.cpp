// Issue 27 item 8: what kube-scheduler and a person read when no node can take a pod.
// kube-scheduler sums a pod's failure up by counting identical node messages
// (framework.FitError.Error(): "0/N nodes are available: <count> <message>, ..." sorted);
// per-node numbers made every message unique, so the pod's condition became thousands of
// reasons and a 5,000-node answer 751 KiB. The answer now carries a few categories, the
// pod's event the closest nodes with their numbers.
#include <zlib.h>

#include <gtest/gtest.h>

#include <cctype>
#include <random>
#include <set>

#include "json_body.h"
#include "cluster_builder.h"
#include "gzip.h"

namespace vgpu::scheduler {
namespace {

using namespace vgpu::testing;

/// The pod's condition as kube-scheduler words it from our answer alone (FitError.Error():
/// each distinct node message once, with the number of nodes that gave it, sorted).
std::string conditionMessage(const json::object& answer, std::size_t nodes) {
  std::map<std::string, int> counts;
  for (const char* map : {"FailedNodes", "FailedAndUnresolvableNodes"})
    for (const auto& [node, why] : answer.at(map).as_object()) ++counts[std::string(why.as_string())];
  std::vector<std::string> parts;
  for (const auto& [why, n] : counts) parts.push_back(std::to_string(n) + " " + why);
  std::sort(parts.begin(), parts.end());
  std::string out = "0/" + std::to_string(nodes) + " nodes are available:";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : " ") + parts[i];
  return out + ".";
}

std::string gunzip(const std::string& packed) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(packed.size() * 40 + 1024, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(packed.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

std::string filteringFailedMessage(SchedulerHarness& h, const std::string& pod) {
  h.service->events().flush();
  std::string message;
  eventually([&] {
    for (const auto& e : h.api->list("events"))
      if (e.at("reason") == "FilteringFailed" && e.at("involvedObject").at("name").as_string() == pod)
        message = std::string(e.at("message").as_string());
    return !message.empty();
  });
  return message;
}

TEST(SchedulerRefusals, StayAHandfulOfTextsWhateverEachNodeHolds) {
  SchedulerHarness h;
  // 40 nodes, each with a different amount of memory taken: 40 different numbers.
  std::vector<std::string> nodes;
  for (int i = 0; i < 40; ++i) {
    nodes.push_back("n" + std::to_string(i));
    h.createNode(nodeJson(nodes.back(), gpus(nodes.back(), 1, 81920)));
    h.createPod(admittedPod("holder-" + std::to_string(i), nodes.back(), 1000 * static_cast<std::uint64_t>(i + 1)));
  }
  ASSERT_TRUE(h.awaitNodes(40));
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == 40; }));
  nodes.push_back("ghost");  // not known: a category of its own

  TestHttpClient http(h.service->extenderPort());
  auto out = parse(http.post("/filter", extenderArgs(h.createPod(gpuPod("wide", 81000)), nodes)).body);
  ASSERT_TRUE(out.at("NodeNames").as_array().empty()) << out;
  std::set<std::string> texts;
  for (const auto& [node, why] : out.at("FailedNodes").as_object()) texts.insert(std::string(why.as_string()));
  EXPECT_EQ(texts, (std::set<std::string>{"vgpu: not enough free device memory (CardInsufficientMemory)", std::string("vgpu: node not known to vgpu-scheduler yet")}));
  for (const auto& t : texts)
    EXPECT_TRUE(std::none_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        << t;
  // The pod's condition: one short line.
  const std::string condition = conditionMessage(out, nodes.size());
  EXPECT_EQ(condition, "0/41 nodes are available: 1 " + std::string("vgpu: node not known to vgpu-scheduler yet") +
                           ", 40 vgpu: not enough free device memory (CardInsufficientMemory).");

  // The numbers, where a person reads them: our event names the closest nodes, closest first.
  const std::string event = filteringFailedMessage(h, "wide");
  EXPECT_NE(event.find("0/41 nodes can take the pod: 40 vgpu: not enough free device memory (CardInsufficientMemory), 1 vgpu: node not known"),
            std::string::npos)
      << event;
  const auto closest = event.find("Closest to fitting: n0: container \"main\" needs 1 nvidia.com/gpu (81000 MiB");
  ASSERT_NE(closest, std::string::npos) << event;
  // Issue 28 item 8: HAMi's "<n>/<total> <Reason>" where a HAMi user looks, then our words.
  EXPECT_NE(event.find("1/1 CardInsufficientMemory: not enough free memory (needs 81000 MiB, 80920 MiB free); n1: ", closest),
            std::string::npos)
      << event;
  EXPECT_NE(event.find("(needs 81000 MiB, 80920 MiB free); n1: ", closest), std::string::npos) << event;
  EXPECT_NE(event.find("(needs 81000 MiB, 79920 MiB free); n2: ", closest), std::string::npos) << event;
  EXPECT_EQ(event.find("n3:"), std::string::npos) << "three nodes, not more: " << event;
}

TEST(SchedulerRefusals, APodAskingMoreDevicesThanANodeHasIsSummarisedAsSuch) {
  // Issue 41 item 2: five GPUs asked of nodes of four whose compute is all taken. The
  // devices' own reason (CardComputeUnitsExhausted) would not help: no node has five.
  SchedulerHarness h;
  std::vector<std::string> nodes{"a", "b"};
  for (const auto& n : nodes) {
    h.createNode(nodeJson(n, gpus(n, 4)));
    for (int g = 0; g < 4; ++g) h.createPod(admittedPod(n + "-holder-" + std::to_string(g), n, 1000, 100, g));
  }
  ASSERT_TRUE(h.awaitNodes(2));
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == 8; }));
  TestHttpClient http(h.service->extenderPort());
  auto out = parse(http.post("/filter", extenderArgs(h.createPod(gpuPod("five", 1000, 0, 5)), nodes)).body);
  ASSERT_TRUE(out.at("NodeNames").as_array().empty()) << out;
  EXPECT_EQ(conditionMessage(out, nodes.size()),
            "0/2 nodes are available: 2 vgpu: fewer sim devices on the node than a container asks "
            "(NodeInsufficientDevice).");
  const std::string event = filteringFailedMessage(h, "five");
  EXPECT_NE(event.find("NodeInsufficientDevice: the node has 4"), std::string::npos) << event;
}

TEST(SchedulerRefusals, NodesCloseByFewerMissingDevicesComeFirst) {
  SchedulerHarness h;
  h.createNode(nodeJson("two-of-four", gpus("two-of-four", 4, 8000)));  // 2 fit, memory short on 2
  h.createNode(nodeJson("one-of-four", gpus("one-of-four", 4, 8000)));  // 1 fits
  h.createNode(nodeJson("small", gpus("small", 4, 1000)));              // none could ever fit
  ASSERT_TRUE(h.awaitNodes(3));
  for (int i = 0; i < 2; ++i) {
    Assignment a;
    a.node = "two-of-four";
    a.containers.push_back({"main", false, {{"sim", "GPU-two-of-four-" + std::to_string(i), i, 7000, 0, 0}}});
    json::object pod = admittedPod("a" + std::to_string(i), "two-of-four", 7000);
    pod["metadata"].as_object()["annotations"].as_object()[std::string(keys::kPodAssignment)] = encodeAssignment(a);
    h.createPod(pod);
  }
  for (int i = 0; i < 3; ++i) {
    Assignment a;
    a.node = "one-of-four";
    a.containers.push_back({"main", false, {{"sim", "GPU-one-of-four-" + std::to_string(i), i, 7500, 0, 0}}});
    json::object pod = admittedPod("b" + std::to_string(i), "one-of-four", 7500);
    pod["metadata"].as_object()["annotations"].as_object()[std::string(keys::kPodAssignment)] = encodeAssignment(a);
    h.createPod(pod);
  }
  ASSERT_TRUE(eventually([&] { return h.service->cache().stats().pods == 5; }));
  TestHttpClient http(h.service->extenderPort());
  auto out = parse(http.post("/filter", extenderArgs(h.createPod(gpuPod("four", 4000, 0, 4)),
                                                     {"small", "one-of-four", "two-of-four"}))
                       .body);
  ASSERT_EQ(out.at("FailedNodes").as_object().size(), 3u) << out;
  const std::string event = filteringFailedMessage(h, "four");
  const auto two = event.find("two-of-four: ");
  const auto one = event.find("one-of-four: ");
  const auto small = event.find("small: ");
  ASSERT_NE(two, std::string::npos) << event;
  EXPECT_LT(two, one) << event;
  EXPECT_LT(one, small) << event;
}

TEST(SchedulerRefusals, AnswerFor5000RefusedNodesFitsIn100KiB) {
  SchedulerHarness h;
  const auto names = addNodes(h, 5000, 8, 81920, 10, std::chrono::seconds(120));
  const std::string body = extenderArgs(gpuPod("huge", 100000, 20), names);
  TestHttpClient plain(h.service->extenderPort());
  auto r = plain.post("/filter", body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.count("Content-Encoding"), 0u) << "only to a client that asks for it";
  const json::object answer = parse(r.body);
  ASSERT_EQ(answer.at("FailedNodes").as_object().size(), 5000u);
  EXPECT_EQ(conditionMessage(answer, 5000), "0/5000 nodes are available: 5000 vgpu: devices too small for the request (CardInsufficientMemory).");

  // kube-scheduler's client (Go's transport) asks for gzip and unpacks it by itself.
  TestHttpClient go(h.service->extenderPort());
  go.setHeader("Accept-Encoding", "gzip");
  auto packed = go.post("/filter", body);
  ASSERT_EQ(packed.status, 200);
  EXPECT_EQ(packed.headers["Content-Encoding"], "gzip");
  EXPECT_LE(packed.body.size(), 100u * 1024) << "answer of " << packed.body.size() << " bytes";
  EXPECT_EQ(gunzip(packed.body), r.body);
  EXPECT_EQ(go.post("/filter", body).body, packed.body) << "the same answer, packed the same (kept)";
  RecordProperty("answer_bytes_plain", static_cast<int>(r.body.size()));
  RecordProperty("answer_bytes_gzip", static_cast<int>(packed.body.size()));
}

TEST(SchedulerRefusals, KeptPackedAnswersServeOnlyTheSameAnswer) {
  GzipCache packer(2);
  std::mt19937 rng(7);
  auto text = [&](std::size_t size) {  // packs no more than tenfold, as answers do
    std::string out(size, ' ');
    for (char& ch : out) ch = static_cast<char>('a' + rng() % 16);
    return out;
  };
  const std::string a = text(100000), c = text(70000);
  std::string b = a;
  b[5000] = b[5000] == 'a' ? 'b' : 'a';
  ASSERT_EQ(gunzip(packer.compress(a).value()), a);
  EXPECT_EQ(packer.compress(a).value(), gzipCompress(a).value());
  EXPECT_EQ(gunzip(packer.compress(b).value()), b) << "as long as a kept one, one byte apart";
  EXPECT_EQ(gunzip(packer.compress(c).value()), c);  // a is no longer kept
  EXPECT_EQ(gunzip(packer.compress(a).value()), a);
  EXPECT_EQ(gunzip(packer.compress(b).value()), b);
}

TEST(SchedulerRefusals, GzipOnlyWhenTheClientAcceptsIt) {
  EXPECT_TRUE(acceptsGzip("gzip"));
  EXPECT_TRUE(acceptsGzip("deflate, GZIP;q=0.5"));
  EXPECT_TRUE(acceptsGzip(" br , gzip "));
  EXPECT_FALSE(acceptsGzip(""));
  EXPECT_FALSE(acceptsGzip("gzip;q=0"));
  EXPECT_FALSE(acceptsGzip("gzip; q=0.000"));
  EXPECT_FALSE(acceptsGzip("x-gzip2, identity"));
}

}  // namespace
}  // namespace vgpu::scheduler
