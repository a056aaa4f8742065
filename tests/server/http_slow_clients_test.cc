// Many slow or simultaneous clients on loopback: connections that trickle their header
// (slowloris) must not delay anyone else and are closed at the header deadline; a burst of
// connections arriving at once is answered in full. Bounded: a few hundred sockets, seconds.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::RawConnection;
using testing::response_statuses;
using testing::ServerFixture;

class HttpSlowClients : public ServerFixture {
 protected:
  // Seconds one request takes on a fresh connection, and its status.
  std::pair<double, int> timed(const std::string& request) {
    auto t0 = Clock::now();
    RawConnection c(port_);
    c.send(request);
    std::string got = c.read_until_close(5000ms);
    auto statuses = response_statuses(got);
    return {std::chrono::duration<double>(Clock::now() - t0).count(),
            statuses.empty() ? 0 : statuses[0]};
  }
};

const std::string kHealth = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

std::string small_generate() {
  const std::string body = R"({"text": "a", "sampling_params": {"max_new_tokens": 2}})";
  return "POST /generate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

TEST_F(HttpSlowClients, SlowlorisDelaysNoOneAndIsClosedAtTheHeaderDeadline) {
  ServerOptions o;
  o.header_timeout = 1500ms;
  o.http_workers = 8;  // far fewer handler threads than slow sockets: those must hold none
  start(o);
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 200; ++i) {
    slow.push_back(std::make_unique<RawConnection>(port_));
    ASSERT_TRUE(slow.back()->connected());
    slow.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n");
  }
  // One header byte per socket every 100 ms, for longer than the header deadline.
  const auto trickle_start = Clock::now();
  std::thread trickle([&] {
    while (Clock::now() - trickle_start < 2500ms) {
      for (auto& c : slow) c->send("X");
      std::this_thread::sleep_for(100ms);
    }
  });
  // Normal clients meanwhile: answered as if the slow ones were not there (a loopback request
  // takes milliseconds; the bound leaves room for a loaded machine, while a thread-per-
  // connection server would make them wait for a slow socket's worker to time out).
  double worst = 0;
  for (int i = 0; i < 10; ++i) {
    auto [health_s, health_status] = timed(kHealth);
    auto [gen_s, gen_status] = timed(small_generate());
    EXPECT_EQ(health_status, 200);
    EXPECT_EQ(gen_status, 200);
    worst = std::max({worst, health_s, gen_s});
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_LT(worst, 1.0);
  trickle.join();
  // Every slow socket was closed at its header deadline, unanswered.
  for (auto& c : slow) {
    std::string got = c->read_until_close(2000ms);
    EXPECT_TRUE(c->closed());
    EXPECT_TRUE(got.empty()) << got;
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - trickle_start).count(), 6.0);
}

TEST_F(HttpSlowClients, IdleConnectionsHoldNoHandlerThread) {
  start();  // up to 192 handler threads, started on demand
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(std::make_unique<RawConnection>(port_));
  EXPECT_EQ(timed(kHealth).second, 200);
  EXPECT_EQ(timed(small_generate()).second, 200);
  // Two requests one after the other: one or two threads (one may still be finishing its
  // write when the next request arrives), never one per idle connection.
  EXPECT_LE(server_->handler_threads(), 2u);
}

TEST_F(HttpSlowClients, HealthAndMetricsAnswerWhileEveryHandlerThreadIsBusy) {
  ServerOptions o;
  o.http_workers = 2;
  start(o, /*step_ms=*/40);
  // Four generations of 50 steps (~2 s each) take both handler threads and queue two more.
  const std::string body = R"({"text": "a", "sampling_params": {"max_new_tokens": 50}})";
  const std::string long_generate =
      "POST /generate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  std::vector<std::unique_ptr<RawConnection>> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<RawConnection>(port_));
    busy.back()->send(long_generate);
  }
  std::this_thread::sleep_for(200ms);
  // Queued behind the generations, these would wait seconds for a free handler thread.
  for (const char* path : {"/health", "/metrics", "/get_load"}) {
    auto [seconds, status] =
        timed(std::string("GET ") + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(status, 200) << path;
    EXPECT_LT(seconds, 0.5) << path;
  }
  for (auto& c : busy) {
    EXPECT_EQ(response_statuses(c->read_until_close(15000ms)), std::vector<int>{200});
  }
}

TEST_F(HttpSlowClients, BurstOfConnectionsIsAnsweredInFull) {
  start();
  std::vector<std::unique_ptr<RawConnection>> burst;
  for (int i = 0; i < 300; ++i) {
    burst.push_back(std::make_unique<RawConnection>(port_));
    ASSERT_TRUE(burst.back()->connected());
  }
  for (size_t i = 0; i < burst.size(); ++i) burst[i]->send(i % 2 ? kHealth : small_generate());
  int ok = 0;
  for (auto& c : burst) {
    std::string got = c->read_until_close(10000ms);
    auto statuses = response_statuses(got);
    if (statuses == std::vector<int>{200} && c->closed()) ++ok;
  }
  EXPECT_EQ(ok, 300);
}

}  // namespace
}  // namespace kiln::server
