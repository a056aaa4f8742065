// What the transport does for cancel-on-disconnect and for a draining shutdown, over the fake
// engine: a non-streaming request whose client leaves is cancelled (its pages return), and
// stop_accepting() refuses new connections while requests in flight finish in full.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::RawConnection;
using testing::ServerFixture;

class HttpDrain : public ServerFixture {
 protected:
  void wait_active(size_t n) {
    for (int i = 0; i < 500 && engine_->active() < n; ++i) std::this_thread::sleep_for(10ms);
    ASSERT_EQ(engine_->active(), n);
  }
};

std::string generate_request(int max_new_tokens, bool stream = false) {
  const std::string body =
      json({{"text", "a"},
            {"stream", stream},
            {"sampling_params", {{"max_new_tokens", max_new_tokens}, {"ignore_eos", true}}}})
          .dump();
  return "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

TEST_F(HttpDrain, NonStreamingRequestIsCancelledWhenItsClientLeaves) {
  start({}, /*step_ms=*/50);  // 60 tokens would take 3 s
  {
    RawConnection c(port_);
    c.send(generate_request(60));
    wait_active(1);
  }  // the client closes its connection without reading an answer
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200 && engine_->aborted() == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(engine_->aborted(), 1);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.5);
  EXPECT_TRUE(server_->wait_requests_done(2s));
  EXPECT_EQ(engine_->stats().kv_pages_used, 0);  // its pages are back
  auto m = client().get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("kiln_requests_total{finish_reason=\"abort\"} 1"), std::string::npos)
      << m->body;
}

TEST_F(HttpDrain, PipelinedRequestBehindAWaitingOneDoesNotCancelIt) {
  start({}, /*step_ms=*/10);
  RawConnection c(port_);
  c.send(generate_request(20) + "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = c.read_until_close(5000ms);
  EXPECT_EQ(testing::response_statuses(got), (std::vector<int>{200, 200})) << got;
  EXPECT_EQ(engine_->aborted(), 0);
}

TEST_F(HttpDrain, StopAcceptingLetsRequestsInFlightFinish) {
  start({}, /*step_ms=*/20);
  std::vector<std::unique_ptr<RawConnection>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<RawConnection>(port_));
    clients.back()->send(generate_request(30));
  }
  RawConnection stream(port_);
  stream.send(generate_request(60, /*stream=*/true));
  RawConnection idle(port_);
  wait_active(4);
  server_->stop_accepting();
  RawConnection late(port_);
  EXPECT_FALSE(late.connected());  // the listening socket is closed
  EXPECT_TRUE(server_->wait_requests_done(10s));
  for (auto& c : clients) {
    std::string got = c->read_until_close(2000ms);
    EXPECT_EQ(testing::response_statuses(got), std::vector<int>{200}) << got;
    const std::string body = got.substr(got.find("\r\n\r\n") + 4);
    const json out = json::parse(body);
    EXPECT_EQ(out["meta_info"]["completion_tokens"], 30) << body;  // the whole output
    EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
    EXPECT_TRUE(c->closed());
  }
  // The stream ended at once with "abort", not after its 60 tokens.
  std::string streamed = stream.read_until_close(2000ms);
  EXPECT_NE(streamed.find("\"abort\""), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed;
  // The idle connection was closed, unanswered.
  EXPECT_EQ(idle.read_until_close(2000ms), "");
  EXPECT_TRUE(idle.closed());
}

}  // namespace
}  // namespace kiln::server
