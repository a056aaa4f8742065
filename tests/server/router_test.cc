// Router's quick routes: which requests skip the handler threads, and the paths it refuses to
// register as quick (dispatch through the regex routes must agree with the lookup by path).
#include "kiln/server/router.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"

namespace kiln::server {
namespace {

HttpRequest request(const std::string& method, const std::string& path) {
  HttpRequest r;
  r.method = method;
  r.path = path;
  return r;
}

void ok(const HttpRequest&, HttpResponse& res) { res.status = 200; }

TEST(Router, QuickRoutesAreFoundByExactPathForGetAndHead) {
  Router r;
  r.post("/generate", ok);
  r.get_quick("/health", ok);
  r.get("/v1/models/(.+)", ok);
  EXPECT_TRUE(r.is_quick(request("GET", "/health")));
  EXPECT_TRUE(r.is_quick(request("HEAD", "/health")));
  EXPECT_FALSE(r.is_quick(request("POST", "/health")));
  EXPECT_FALSE(r.is_quick(request("GET", "/health/")));
  EXPECT_FALSE(r.is_quick(request("GET", "/v1/models/x")));
  EXPECT_FALSE(r.is_quick(request("POST", "/generate")));
  HttpResponse res;
  r.dispatch(request("GET", "/health"), res);  // and dispatch runs it
  EXPECT_EQ(res.status, 200);
}

TEST(Router, QuickRouteRefusesPatternsAndShadowedPaths) {
  Router r;
  r.get("/v1/models/(.+)", ok);
  EXPECT_THROW(r.get_quick("/v1/models/x", ok), kiln::Error);  // the earlier route would win
  EXPECT_THROW(r.get_quick("/metrics.*", ok), kiln::Error);    // not a literal path
  EXPECT_NO_THROW(r.get_quick("/get_load", ok));
}

TEST(Router, QuickRouteDotIsALiteralDot) {
  Router r;
  r.get_quick("/webui/app.js", ok);
  EXPECT_TRUE(r.is_quick(request("GET", "/webui/app.js")));
  EXPECT_EQ(r.methods("/webui/app.js"), std::vector<std::string>{"GET"});
  EXPECT_TRUE(r.methods("/webui/appxjs").empty());  // not "any character"
  HttpResponse res;
  r.dispatch(request("GET", "/webui/appxjs"), res);
  EXPECT_EQ(res.status, 404);
}

}  // namespace
}  // namespace kiln::server
