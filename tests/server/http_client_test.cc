// The Beast client (http_client.h, json_client.h) against servers scripted byte by byte and
// against kiln's own server: JSON replies, errors with the server's message, a path prefix and
// the API key, server-sent events handed on as they arrive, a kept connection the server
// closed, and a server that is not there.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/server/json_client.h"
#include "server/scripted_http_server.h"
#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using testing::http_reply;
using testing::ScriptedConnection;
using testing::ScriptedServer;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// One chunk of a chunked body.
std::string chunk(const std::string& data) {
  char size[24];
  std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  return size + data + "\r\n";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(JsonClient, GetAndPostWithPrefixAndApiKey) {
  std::string get_head, post_head, post_body;
  ScriptedServer server([&](ScriptedConnection& c) {
    get_head = c.read_request();
    c.write(http_reply(200, R"({"data": [1, 2]})"));
    post_head = c.read_request(&post_body);
    c.write(http_reply(201, R"({"ok": true})"));
  });
  JsonClient client(server.url() + "/api/", "k3y");
  EXPECT_EQ(client.get("/v1/models")["data"], json({1, 2}));
  EXPECT_EQ(client.post("/generate", {{"text", "hi"}})["ok"], true);
  // Both on one connection, under the prefix, with the key.
  EXPECT_EQ(get_head.rfind("GET /api/v1/models HTTP/1.1\r\n", 0), 0u) << get_head;
  EXPECT_TRUE(contains(get_head, "Authorization: Bearer k3y\r\n")) << get_head;
  EXPECT_EQ(post_head.rfind("POST /api/generate HTTP/1.1\r\n", 0), 0u) << post_head;
  EXPECT_TRUE(contains(post_head, "Content-Type: application/json\r\n")) << post_head;
  EXPECT_EQ(json::parse(post_body), json({{"text", "hi"}}));
}

TEST(JsonClient, ErrorStatusThrowsWithTheServersMessage) {
  ScriptedServer server(
      [](ScriptedConnection& c) {
        c.read_request();
        c.write(http_reply(400, R"({"error": {"message": "max_tokens must be positive"}})"));
        c.read_request();
        c.write(http_reply(503, "overloaded"));
      },
      1);
  JsonClient client(server.url());
  const std::string e1 = error_of([&] { client.post("/v1/completions", json::object()); });
  EXPECT_TRUE(contains(e1, "HTTP 400: max_tokens must be positive")) << e1;
  EXPECT_TRUE(contains(e1, "/v1/completions")) << e1;
  // Not JSON: the body itself.
  const std::string e2 = error_of([&] { client.post_expect_ok("/flush_cache"); });
  EXPECT_TRUE(contains(e2, "HTTP 503: overloaded")) << e2;
}

TEST(JsonClient, StreamedEventsArriveBeforeTheStreamEnds) {
  // The server sends the second event only once the client has handled the first: a client
  // that waited for the whole body would never see it.
  std::promise<void> first_seen;
  auto first = first_seen.get_future();
  bool second_sent_after_first = false;
  ScriptedServer server([&](ScriptedConnection& c) {
    c.read_request();
    c.write(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
    // The first event split across two chunks (a read may end mid-event).
    c.write(chunk("data: {\"i\""));
    c.write(chunk(": 1}\n\n"));
    second_sent_after_first = first.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    c.write(chunk("data: {\"i\": 2}\n\ndata: [DONE]\n\n") + "0\r\n\r\n");
  });
  JsonClient client(server.url());
  std::vector<int> seen;
  std::vector<JsonClient::Clock::time_point> at;
  client.post_stream("/generate", {{"stream", true}},
                     [&](const json& ev, JsonClient::Clock::time_point t) {
                       seen.push_back(ev["i"].get<int>());
                       at.push_back(t);
                       if (seen.size() == 1) first_seen.set_value();
                     });
  EXPECT_TRUE(second_sent_after_first);
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  ASSERT_EQ(at.size(), 2u);
  EXPECT_LE(at[0], at[1]);
}

TEST(JsonClient, StreamErrorStatusCarriesTheMessage) {
  ScriptedServer server([](ScriptedConnection& c) {
    c.read_request();
    c.write(http_reply(401, R"({"error": {"message": "missing or wrong API key"}})"));
  });
  JsonClient client(server.url());
  const std::string e = error_of([&] {
    client.post_stream("/generate", json::object(), [](const json&, JsonClient::Clock::time_point) {
      ADD_FAILURE() << "no event in an error reply";
    });
  });
  EXPECT_TRUE(contains(e, "HTTP 401: missing or wrong API key")) << e;
}

TEST(HttpClient, KeptConnectionClosedByTheServerIsReopened) {
  // Each connection answers one request and closes without saying so, as a server does when
  // its keep-alive timeout ends between two requests.
  int served = 0;
  ScriptedServer server(
      [&](ScriptedConnection& c) {
        c.read_request();
        c.write(http_reply(200, std::to_string(++served)));
      },
      2);
  HttpClient client("127.0.0.1", std::to_string(server.port()));
  EXPECT_EQ(client.get("/a").body, "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the close reaches the client
  EXPECT_EQ(client.get("/b").body, "2");
}

TEST(HttpClient, SilentServerTimesOut) {
  ScriptedServer server([](ScriptedConnection& c) {
    c.read_request();
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // answers nothing
  });
  HttpClientTimeouts t;
  t.io = std::chrono::milliseconds(200);
  HttpClient client("127.0.0.1", std::to_string(server.port()), t);
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { client.get("/slow"); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(550));
  EXPECT_TRUE(contains(e, "GET http://127.0.0.1:")) << e;
  EXPECT_TRUE(contains(e, "no reply")) << e;
}

TEST(JsonClient, ConnectionRefusedIsAClearError) {
  int port = 0;
  {
    ScriptedServer gone([](ScriptedConnection&) {}, 0);  // a free port nobody listens on next
    port = gone.port();
  }
  JsonClient client("http://127.0.0.1:" + std::to_string(port));
  const std::string e = error_of([&] { client.get("/health"); });
  EXPECT_TRUE(contains(e, "cannot connect to 127.0.0.1:" + std::to_string(port))) << e;
  EXPECT_TRUE(contains(e, "refused")) << e;
}

TEST(JsonClient, UrlsItCannotUseAreRefused) {
  EXPECT_THROW(JsonClient("https://127.0.0.1:1"), kiln::Error);
  EXPECT_THROW(JsonClient("127.0.0.1:1"), kiln::Error);
  EXPECT_THROW(JsonClient("http://127.0.0.1:port"), kiln::Error);
}

using JsonClientOnKiln = testing::ServerFixture;

TEST_F(JsonClientOnKiln, JsonRepliesErrorsAndStreamsFromTheServer) {
  start({}, /*step_ms=*/2);
  JsonClient client("http://127.0.0.1:" + std::to_string(port_));
  EXPECT_EQ(client.get("/v1/models")["data"][0]["id"], "fake-model");
  const json tokens = client.post("/tokenize", {{"prompt", "ab"}})["tokens"];
  EXPECT_EQ(client.post("/detokenize", {{"tokens", tokens}})["text"], "ab");
  const std::string e = error_of([&] { client.post("/detokenize", {{"tokens", {1000}}}); });
  EXPECT_TRUE(contains(e, "HTTP 400: ")) << e;
  EXPECT_FALSE(contains(e, "{\"error\"")) << e;  // the message, not the JSON around it
  std::vector<int> completed;
  client.post_stream(
      "/generate", {{"text", "a"}, {"stream", true}, {"sampling_params", {{"max_new_tokens", 4}}}},
      [&](const json& ev, JsonClient::Clock::time_point) {
        completed.push_back(ev["meta_info"]["completion_tokens"].get<int>());
      });
  ASSERT_FALSE(completed.empty());
  EXPECT_TRUE(std::is_sorted(completed.begin(), completed.end()));
  EXPECT_EQ(completed.back(), 4);
  client.post_expect_ok("/flush_cache");
}

}  // namespace
}  // namespace kiln::server
