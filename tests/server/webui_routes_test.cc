// The chat page's routes (webui_routes.h) on a real HttpServer over the fake backend: the
// embedded files are the checkout's, `/` and /webui/<name> answer with their types, the
// security policy and revalidation, --no-webui turns `/` into a 404 naming the flag, and the
// page's files need no API key while everything else still does.
#include "kiln/server/webui_routes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/server/embedded_file.h"
#include "kiln/server/router.h"
#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using WebuiTest = testing::ServerFixture;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string embedded(std::string_view name) {
  for (const EmbeddedFile& f : webui_files()) {
    if (f.name == name) return std::string(f.bytes);
  }
  return {};
}

TEST(WebuiFiles, AreTheCheckoutsFilesByteForByte) {
  const std::filesystem::path dir = std::filesystem::path(KILN_SOURCE_DIR) / "webui";
  size_t on_disk = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    ++on_disk;
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(embedded(name), read_file(entry.path())) << name;
  }
  EXPECT_EQ(webui_files().size(), on_disk);
  EXPECT_FALSE(embedded("index.html").empty());
}

TEST_F(WebuiTest, PageAndFilesCarryTypeCachingAndPolicy) {
  start();
  auto c = client();
  auto page = c.get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body, embedded("index.html"));
  EXPECT_EQ(page->headers.get("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->headers.get("Content-Security-Policy"), kWebuiContentSecurityPolicy);
  EXPECT_EQ(page->headers.get("Cache-Control"), "no-cache");
  EXPECT_EQ(page->headers.get("X-Content-Type-Options"), "nosniff");
  const std::string etag = page->headers.get("ETag");
  ASSERT_FALSE(etag.empty());

  auto script = c.get("/webui/app.js");
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->headers.get("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(script->body, embedded("app.js"));
  EXPECT_NE(script->headers.get("ETag"), etag);  // one tag per file
  EXPECT_EQ(c.get("/webui/style.css")->headers.get("Content-Type"), "text/css; charset=utf-8");
  // index.html is the page at `/`, not a file of its own; unknown files are 404.
  EXPECT_EQ(c.get("/webui/index.html")->status, 404);
  EXPECT_EQ(c.get("/webui/missing.js")->status, 404);
  EXPECT_EQ(c.get("/webui/appxjs")->status, 404);  // the dot in the route is a dot

  // Revalidation: the same tag (alone, in a list, weak) gets 304 without a body.
  for (const std::string& tag : {etag, "\"x\", " + etag, "W/" + etag, std::string("*")}) {
    auto same = c.get("/", {{"If-None-Match", tag}});
    EXPECT_EQ(same->status, 304) << tag;
    EXPECT_TRUE(same->body.empty()) << tag;
    EXPECT_EQ(same->headers.get("ETag"), etag);
  }
  EXPECT_EQ(c.get("/", {{"If-None-Match", "\"other\""}})->status, 200);

  auto head = c.send("HEAD", "/");
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  EXPECT_EQ(c.send("POST", "/")->status, 405);
}

TEST_F(WebuiTest, TurnedOffThePageIs404NamingTheFlag) {
  ServerOptions o;
  o.webui = false;
  start(o);
  auto c = client();
  auto page = c.get("/");
  EXPECT_EQ(page->status, 404);
  EXPECT_NE(json::parse(page->body)["error"]["message"].get<std::string>().find("--no-webui"),
            std::string::npos);
  EXPECT_EQ(c.get("/webui/app.js")->status, 404);
  EXPECT_EQ(c.get("/health")->status, 200);
}

TEST_F(WebuiTest, PageFilesNeedNoKeyTheApiDoes) {
  ServerOptions o;
  o.api_key = "sekret";
  start(o);
  auto c = client();
  EXPECT_EQ(c.get("/")->status, 200);
  EXPECT_EQ(c.get("/webui/app.js")->status, 200);
  EXPECT_EQ(c.get("/webui/missing.js")->status, 401);
  EXPECT_EQ(c.get("/v1/models")->status, 401);
  EXPECT_EQ(c.get("/v1/models", {{"Authorization", "Bearer sekret"}})->status, 200);
}

TEST_F(WebuiTest, TurnedOffThePageNeedsTheKeyLikeEverythingElse) {
  ServerOptions o;
  o.api_key = "sekret";
  o.webui = false;
  start(o);
  EXPECT_EQ(client().get("/")->status, 401);
  EXPECT_EQ(client().get("/", {{"Authorization", "Bearer sekret"}})->status, 404);
}

TEST(WebuiPaths, AreThePageAndItsFilesOnly) {
  EXPECT_TRUE(is_webui_path("/"));
  EXPECT_TRUE(is_webui_path("/webui/app.js"));
  EXPECT_FALSE(is_webui_path("/webui/index.html"));
  EXPECT_FALSE(is_webui_path("/webui/"));
  EXPECT_FALSE(is_webui_path("/webui/../v1/models"));
  EXPECT_FALSE(is_webui_path("/v1/models"));
  EXPECT_FALSE(is_webui_path("//"));
}

}  // namespace
}  // namespace kiln::server
