// How the server frames requests on a kept-alive connection, against clients that send what
// an HTTP library would not: bytes of a request body must never be parsed as a request, a
// POST without a body must not wait for the client to close, malformed requests end the
// connection. Raw sockets, so every byte on the wire is the test's choice.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using namespace std::chrono_literals;
using testing::RawConnection;
using testing::response_statuses;
using testing::ServerFixture;

const std::string kSmuggled = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

std::string post_head(const std::string& path, size_t length, const std::string& extra = {}) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

class HttpConnection : public ServerFixture {};

TEST_F(HttpConnection, RejectedPostBodyIsNeverParsedAsARequest) {
  ServerOptions o;
  o.api_key = "sekret";
  start(o);
  RawConnection c(port_);
  ASSERT_TRUE(c.connected());
  // Head and body in separate writes, as HTTP clients send them: the body reaches the server
  // after it has answered the head.
  c.send(post_head("/generate", kSmuggled.size(), "Authorization: Bearer wrong\r\n"));
  std::this_thread::sleep_for(50ms);
  c.send(kSmuggled);
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), std::vector<int>{401}) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  EXPECT_EQ(got.find("Connection: close"), got.rfind("Connection: close")) << got;
  EXPECT_EQ(got.find("Keep-Alive"), std::string::npos) << got;
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpConnection, UnauthorizedRequestWithoutBodyKeepsTheConnection) {
  ServerOptions o;
  o.api_key = "sekret";
  start(o);
  RawConnection c(port_);
  c.send("GET /get_model_info HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  c.send(
      "GET /get_model_info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekret\r\n"
      "Connection: close\r\n\r\n");
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), (std::vector<int>{401, 200})) << got;
}

TEST_F(HttpConnection, PostWithoutContentLengthHasAnEmptyBody) {
  start();
  RawConnection c(port_);
  auto t0 = std::chrono::steady_clock::now();
  // SGLang's documented `curl -X POST .../flush_cache` sends exactly this.
  c.send("POST /flush_cache HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  c.send("POST /generate HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = c.read_until_close(5000ms);
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(response_statuses(got), (std::vector<int>{200, 400})) << got;
  EXPECT_NE(got.find("Cache flushed."), std::string::npos) << got;
  EXPECT_NE(got.find("the request body is empty"), std::string::npos) << got;
  EXPECT_LT(seconds, 2.0);
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpConnection, PostWithoutContentLengthToUnknownRouteIs404) {
  start();
  RawConnection c(port_);
  c.send("POST /nope HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  c.send("POST /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), (std::vector<int>{404, 405})) << got;
  EXPECT_NE(got.find("Allow: GET"), std::string::npos) << got;
}

TEST_F(HttpConnection, GarbageRequestLineIs400AndCloses) {
  start();
  RawConnection c(port_);
  c.send("THIS IS NOT HTTP\r\n" + kSmuggled);
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), std::vector<int>{400}) << got;
  EXPECT_NE(got.find("\"error\""), std::string::npos) << got;
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpConnection, BodyOfAGetIsNeverParsedAsARequest) {
  start();
  RawConnection c(port_);
  c.send("GET /get_model_info HTTP/1.1\r\nHost: x\r\nContent-Length: " +
         std::to_string(kSmuggled.size()) + "\r\n\r\n");
  std::this_thread::sleep_for(50ms);
  c.send(kSmuggled);
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), std::vector<int>{200}) << got;
  EXPECT_NE(got.find("fake.gguf"), std::string::npos) << got;
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpConnection, UntrustworthyFramingIs400AndCloses) {
  start();
  for (const std::string& head :
       {std::string("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n"),
        std::string("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                    "Content-Length: 6\r\n\r\n"),
        std::string("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n"),
        std::string("POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, "
                    "chunked\r\n\r\n")}) {
    RawConnection c(port_);
    c.send(head);
    std::this_thread::sleep_for(20ms);
    c.send(kSmuggled);
    std::string got = c.read_until_close(3000ms);
    EXPECT_EQ(response_statuses(got), std::vector<int>{400}) << head << got;
    EXPECT_TRUE(c.closed()) << head;
  }
}

TEST_F(HttpConnection, OversizedBodyIs413AndCloses) {
  ServerOptions o;
  o.max_body_bytes = 1000;
  start(o);
  RawConnection c(port_);
  c.send(post_head("/generate", 2000) + std::string(2000, ' ') + kSmuggled);
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), std::vector<int>{413}) << got;
  EXPECT_TRUE(c.closed());
}

// The body limit holds for a chunked body too, not only for a Content-Length.
TEST_F(HttpConnection, OversizedChunkedBodyIs413AndCloses) {
  ServerOptions o;
  o.max_body_bytes = 1000;
  start(o);
  RawConnection c(port_);
  c.send("POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 3; ++i) c.send("258\r\n" + std::string(600, ' ') + "\r\n");
  c.send("0\r\n\r\n" + kSmuggled);
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), std::vector<int>{413}) << got;
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpConnection, ChunkedBodyWithinTheLimitIsRead) {
  start();
  RawConnection c(port_);
  const std::string body = R"({"text": "a", "sampling_params": {"max_new_tokens": 2}})";
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  c.send(
      "POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
      "Connection: close\r\n\r\n" +
      std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), std::vector<int>{200}) << got;
  EXPECT_NE(got.find("\"text\""), std::string::npos) << got;
}

// A transfer coding other than chunked (RFC 9112 §6.1: a server that does not understand one
// answers 501): the body, gzip data once the chunks are undone, is never read as JSON.
TEST_F(HttpConnection, TransferCodingOtherThanChunkedIs501) {
  start();
  for (const std::string& codings :
       {std::string("Transfer-Encoding: gzip, chunked\r\n"),
        std::string("Transfer-Encoding: Deflate;x=1 ,chunked\r\n"),
        std::string("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n")}) {
    RawConnection c(port_);
    c.send("POST /generate HTTP/1.1\r\nHost: x\r\n" + codings + "\r\n");
    std::this_thread::sleep_for(20ms);
    c.send("2\r\n{}\r\n0\r\n\r\n" + kSmuggled);
    std::string got = c.read_until_close(3000ms);
    EXPECT_EQ(response_statuses(got), std::vector<int>{501}) << codings << got;
    const std::string name = codings.find("Deflate") != std::string::npos ? "deflate" : "gzip";
    EXPECT_NE(got.find("transfer coding '" + name + "'"), std::string::npos) << got;
    EXPECT_TRUE(c.closed()) << codings;
  }
}

// Expect: 100-continue on a request without a body needs no interim answer: the request is
// answered at once (it once waited for the body timeout and was closed unanswered).
TEST_F(HttpConnection, ExpectContinueWithoutBodyIsAnsweredAtOnce) {
  start();
  for (const std::string& length : {std::string("Content-Length: 0\r\n"), std::string()}) {
    RawConnection c(port_);
    const auto t0 = std::chrono::steady_clock::now();
    c.send("POST /flush_cache HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n" + length +
           "Connection: close\r\n\r\n");
    std::string got = c.read_until_close(3000ms);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(response_statuses(got), std::vector<int>{200}) << length << got;
    EXPECT_NE(got.find("Cache flushed."), std::string::npos) << got;
    EXPECT_LT(seconds, 2.0) << length;
    EXPECT_TRUE(c.closed()) << length;
  }
}

// With a body, the client waits for 100 Continue before sending it (as curl does for large
// bodies), then gets the answer on the same connection.
// (The expectation's value is case-insensitive.)
TEST_F(HttpConnection, ExpectContinueWithBodyGets100ThenTheAnswer) {
  start();
  for (const char* expect : {"100-continue", "100-Continue"}) {
    RawConnection c(port_);
    const std::string body = R"({"text": "a", "sampling_params": {"max_new_tokens": 2}})";
    c.send(post_head("/generate", body.size(),
                     std::string("Expect: ") + expect + "\r\nConnection: close\r\n"));
    std::string interim = c.read_until_close(500ms);  // no close: the 100 and then silence
    EXPECT_EQ(interim, "HTTP/1.1 100 Continue\r\n\r\n") << expect;
    EXPECT_FALSE(c.closed()) << expect;
    c.send(body);
    std::string got = c.read_until_close(3000ms);
    EXPECT_EQ(response_statuses(got), std::vector<int>{200}) << expect << got;
    EXPECT_NE(got.find("\"text\""), std::string::npos) << got;
  }
}

// A body kiln does not decode (any Content-Encoding): 415, unread, and the connection ends
// (400 is also accepted, as an answer that refuses the body).
TEST_F(HttpConnection, UndecodableBodyEndsTheConnection) {
  start();
  RawConnection c(port_);
  c.send(post_head("/generate", kSmuggled.size(), "Content-Encoding: br\r\n"));
  std::this_thread::sleep_for(50ms);
  c.send(kSmuggled);
  std::string got = c.read_until_close(3000ms);
  auto statuses = response_statuses(got);
  ASSERT_EQ(statuses.size(), 1u) << got;
  EXPECT_TRUE(statuses[0] == 400 || statuses[0] == 415) << got;
  EXPECT_TRUE(c.closed());
}

TEST_F(HttpConnection, ClosingResponseHasEachHeaderOnce) {
  ServerOptions o;
  o.api_key = "sekret";
  start(o);
  RawConnection c(port_);
  c.send(post_head("/generate", 2, "Connection: close\r\n") + "{}");
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), std::vector<int>{401}) << got;
  for (const char* header : {"Connection: close", "Content-Type: ", "Content-Length: "}) {
    EXPECT_NE(got.find(header), std::string::npos) << header << "\n" << got;
    EXPECT_EQ(got.find(header), got.rfind(header)) << header << "\n" << got;
  }
  EXPECT_NE(got.find("\"authentication_error\""), std::string::npos) << got;
}

TEST_F(HttpConnection, SequentialRequestsShareTheConnection) {
  start();
  RawConnection c(port_);
  const std::string body = R"({"text": "a", "sampling_params": {"max_new_tokens": 2}})";
  c.send(post_head("/generate", body.size()) + body);
  std::this_thread::sleep_for(100ms);
  c.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = c.read_until_close(3000ms);
  EXPECT_EQ(response_statuses(got), (std::vector<int>{200, 200})) << got;
}

// Requests pipelined into one packet are all answered, in order, on the same connection.
TEST_F(HttpConnection, PipelinedRequestsAreAnsweredInOrder) {
  start();
  RawConnection c(port_);
  const std::string body = R"({"text": "a", "sampling_params": {"max_new_tokens": 2}})";
  c.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post_head("/generate", body.size()) + body +
         "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
         "GET /get_model_info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = c.read_until_close(8000ms);
  EXPECT_EQ(response_statuses(got), (std::vector<int>{200, 200, 404, 200})) << got;
  EXPECT_LT(got.find("\"text\""), got.find("fake.gguf")) << got;
  EXPECT_TRUE(c.closed());
}

}  // namespace
}  // namespace kiln::server
