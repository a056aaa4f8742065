// kiln's HTTP message types: header names without case, repeated fields, values that would
// split a response, and the URLs the client accepts.
#include "kiln/server/http_message.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/server/http_client.h"

namespace kiln::server {
namespace {

TEST(HttpHeaders, NamesMatchWhateverTheirCase) {
  HttpHeaders h;
  h.add("Content-Type", "application/json");
  EXPECT_EQ(h.get("content-type"), "application/json");
  EXPECT_EQ(h.get("CONTENT-TYPE"), "application/json");
  EXPECT_TRUE(h.has("cOnTeNt-TyPe"));
  EXPECT_FALSE(h.has("Content-Length"));
  EXPECT_EQ(h.get("Content-Length"), "");
  // set() replaces the field however the name was spelled before.
  h.set("CONTENT-type", "text/plain");
  EXPECT_EQ(h.count("Content-Type"), 1u);
  EXPECT_EQ(h.get("content-type"), "text/plain");
  h.erase("content-TYPE");
  EXPECT_TRUE(h.empty());
}

TEST(HttpHeaders, RepeatedFieldsKeepTheirOrder) {
  HttpHeaders h{{"Transfer-Encoding", "gzip"}, {"X-Other", "1"}, {"transfer-encoding", "chunked"}};
  EXPECT_EQ(h.count("Transfer-Encoding"), 2u);
  EXPECT_EQ(h.get("Transfer-Encoding", 0), "gzip");
  EXPECT_EQ(h.get("Transfer-Encoding", 1), "chunked");
  EXPECT_EQ(h.get("Transfer-Encoding", 2), "");
  std::vector<std::string> names;
  for (const auto& [name, value] : h) names.push_back(name);
  EXPECT_EQ(names.size(), 3u);
}

TEST(HttpHeaders, ValuesWithLineBreaksAreDropped) {
  HttpHeaders h;
  h.set("Access-Control-Allow-Headers", "a\r\nSet-Cookie: x=1");
  h.add("X-Injected", "a\nb");
  h.add("X\r\nBad", "v");
  EXPECT_TRUE(h.empty());
  h.set("Vary", "Origin");
  h.set("Vary", "bad\rvalue");  // keeps the last good value
  EXPECT_EQ(h.get("Vary"), "Origin");
}

TEST(HttpResponse, SetContentKeepsOneContentType) {
  HttpResponse res;
  EXPECT_EQ(res.status, 200);
  res.set_content("a", "text/plain");
  res.set_content("{}", "application/json");
  EXPECT_EQ(res.body, "{}");
  EXPECT_EQ(res.headers.count("content-type"), 1u);
  EXPECT_EQ(res.headers.get("Content-Type"), "application/json");
  EXPECT_FALSE(res.producer);
  res.set_producer("text/event-stream", [](const BodyWriter& write) { return write("x"); });
  EXPECT_EQ(res.headers.get("Content-Type"), "text/event-stream");
  std::string written;
  EXPECT_TRUE(res.producer([&](std::string_view piece) {
    written.append(piece);
    return true;
  }));
  EXPECT_EQ(written, "x");
}

TEST(HttpUrl, HostPortAndPrefix) {
  HttpUrl u = parse_http_url("http://127.0.0.1:30000");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, "30000");
  EXPECT_EQ(u.prefix, "");
  u = parse_http_url("http://gpu-box:8000/api/v2//");
  EXPECT_EQ(u.host, "gpu-box");
  EXPECT_EQ(u.port, "8000");
  EXPECT_EQ(u.prefix, "/api/v2");
  u = parse_http_url("http://example.com/");
  EXPECT_EQ(u.port, "80");
  EXPECT_EQ(u.prefix, "");
  u = parse_http_url("http://[::1]:9000/x");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, "9000");
  EXPECT_EQ(u.prefix, "/x");
  EXPECT_THROW(parse_http_url("https://example.com"), kiln::Error);
  EXPECT_THROW(parse_http_url("example.com:80"), kiln::Error);
  EXPECT_THROW(parse_http_url("http://:80"), kiln::Error);
  EXPECT_THROW(parse_http_url("http://h:8o"), kiln::Error);
}

}  // namespace
}  // namespace kiln::server
