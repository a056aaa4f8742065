// Routes and headers the OpenAI and SGLang specs have that kiln lacked, CORS, and the API key.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/base/error.h"
#include "kiln/server/api_key.h"
#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using testing::ServerFixture;

class HttpSpec : public ServerFixture {};

TEST_F(HttpSpec, FlushCacheAcceptsGetAndPost) {
  start();
  auto c = client();
  auto g = c.get("/flush_cache");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200) << g->body;
  EXPECT_EQ(c.post("/flush_cache")->status, 200);
}

TEST_F(HttpSpec, RetrieveModel) {
  start();
  auto c = client();
  auto ok = c.get("/v1/models/fake-model");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  auto m = json::parse(ok->body);
  EXPECT_EQ(m["id"], "fake-model");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["owned_by"], "kiln");
  for (const char* path : {"/v1/models/other", "/v1/models/org/fake-model"}) {
    auto nf = c.get(path);
    ASSERT_TRUE(nf);
    EXPECT_EQ(nf->status, 404) << path;
    auto e = json::parse(nf->body)["error"];
    EXPECT_EQ(e["code"], 404);
    EXPECT_EQ(e["param"], "model");
    EXPECT_NE(e["message"].get<std::string>().find("does not exist"), std::string::npos);
  }
  // The list is unchanged.
  EXPECT_EQ(json::parse(c.get("/v1/models")->body)["data"][0]["id"], "fake-model");
}

TEST_F(HttpSpec, PreflightIsAnsweredWithoutTheKey) {
  ServerOptions o;
  o.api_key = "sekret";
  start(o);
  auto c = client();
  auto r = c.options("/v1/chat/completions", {{"Origin", "http://page.example"},
                                              {"Access-Control-Request-Method", "POST"},
                                              {"Access-Control-Request-Headers",
                                               "authorization, content-type, x-stainless-os"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->headers.get("Access-Control-Allow-Origin"), "*");
  EXPECT_EQ(r->headers.get("Access-Control-Allow-Methods"), "OPTIONS, POST");
  EXPECT_EQ(r->headers.get("Access-Control-Allow-Headers"),
            "authorization, content-type, x-stainless-os");
  auto plain = c.options("/health");
  EXPECT_EQ(plain->status, 204);
  EXPECT_EQ(plain->headers.get("Access-Control-Allow-Headers"), "Authorization, Content-Type");
  EXPECT_EQ(c.options("/no/such/route")->status, 404);
  // Without the option, actual responses do not let other origins read them.
  auto h = c.get("/health");
  EXPECT_FALSE(h->headers.has("Access-Control-Allow-Origin"));
}

TEST_F(HttpSpec, CorsAllowOriginOption) {
  ServerOptions o;
  o.cors_allow_origin = "http://page.example";
  start(o);
  auto c = client();
  auto h = c.get("/health");
  EXPECT_EQ(h->headers.get("Access-Control-Allow-Origin"), "http://page.example");
  EXPECT_EQ(h->headers.get("Vary"), "Origin");
  auto err = c.get("/nope");
  EXPECT_EQ(err->headers.get("Access-Control-Allow-Origin"), "http://page.example");
  auto stream = post("/generate",
                     R"({"text": "a", "stream": true, "sampling_params": {"max_new_tokens": 2}})");
  EXPECT_EQ(stream->headers.get("Access-Control-Allow-Origin"), "http://page.example");
  auto pre = c.options("/generate", {{"Access-Control-Request-Method", "POST"}});
  EXPECT_EQ(pre->headers.get("Access-Control-Allow-Origin"), "http://page.example");
}

TEST(ApiKey, ConstantTimeEquals) {
  EXPECT_TRUE(constant_time_equals("sekret", "sekret"));
  EXPECT_FALSE(constant_time_equals("sekreT", "sekret"));
  EXPECT_FALSE(constant_time_equals("sekre", "sekret"));
  EXPECT_FALSE(constant_time_equals("sekrets", "sekret"));
  EXPECT_FALSE(constant_time_equals("", "sekret"));
  // A guess that repeats the key is not the key (the loop wraps around the secret).
  EXPECT_FALSE(constant_time_equals("sekretsekret", "sekret"));
  EXPECT_TRUE(bearer_matches("Bearer sekret", "sekret"));
  EXPECT_FALSE(bearer_matches("bearer sekret", "sekret"));
  EXPECT_FALSE(bearer_matches("sekret", "sekret"));
  EXPECT_FALSE(bearer_matches("Bearer ", "sekret"));
}

std::string write_temp(const std::string& content) {
  std::string path = ::testing::TempDir() + "kiln_api_key_" +
                     std::to_string(std::hash<std::string>{}(content)) + ".txt";
  std::ofstream(path) << content;
  return path;
}

TEST(ApiKey, ReadFromFile) {
  EXPECT_EQ(read_api_key_file(write_temp("sekret\n")), "sekret");
  EXPECT_EQ(read_api_key_file(write_temp("sekret\r\nsecond line\n")), "sekret");
  EXPECT_EQ(read_api_key_file(write_temp("no newline")), "no newline");
  std::string empty = write_temp("");
  try {
    read_api_key_file(empty);
    FAIL() << "an empty key file was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is empty"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(empty), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_api_key_file(write_temp("\nkey on the second line\n")), kiln::Error);
  try {
    read_api_key_file("/no/such/dir/key.txt");
    FAIL() << "a missing key file was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/no/such/dir/key.txt"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::server
