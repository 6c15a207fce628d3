// base/http_request.h: when a request head is whole, what its request line
// asks for, and which heads are malformed or too large (issue 33, item 2:
// the metrics server answers from this alone).
#include "base/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace msched {
namespace {

using State = HttpRequestHead::State;

TEST(HttpRequestTest, AWholeHeadGivesItsMethodAndPathWithoutTheQuery) {
  const std::string text = "GET /metrics?x=1&y HTTP/1.1\r\nHost: 127.0.0.1:9400\r\nAccept: */*\r\n\r\n";
  const HttpRequestHead h = ParseHttpRequestHead(text);
  EXPECT_EQ(h.state, State::kComplete);
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.path, "/metrics");
  const HttpRequestHead bare = ParseHttpRequestHead("HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(bare.state, State::kComplete);
  EXPECT_EQ(bare.method, "HEAD");
  EXPECT_EQ(bare.path, "/metrics");
  EXPECT_EQ(ParseHttpRequestHead("DELETE /a/b HTTP/1.1\r\n\r\n").path, "/a/b");
}

TEST(HttpRequestTest, LinesMayEndInABareLineFeed) {
  for (const char* text : {"GET /metrics HTTP/1.1\n\n", "GET /metrics HTTP/1.1\nHost: a\n\n",
                           "GET /metrics HTTP/1.1\r\nHost: a\n\r\n", "GET /metrics HTTP/1.1\nHost: a\r\n\n"}) {
    EXPECT_EQ(ParseHttpRequestHead(text).state, State::kComplete) << text;
  }
}

TEST(HttpRequestTest, BytesAfterTheHeadAreIgnored) {
  const HttpRequestHead h =
      ParseHttpRequestHead("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1");
  EXPECT_EQ(h.state, State::kComplete);
  EXPECT_EQ(h.method, "POST");
}

TEST(HttpRequestTest, EveryProperPrefixOfAHeadIsIncomplete) {
  const std::string text = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: Prometheus/2.45\r\n\r\n";
  for (size_t n = 0; n < text.size(); ++n) {
    const HttpRequestHead h = ParseHttpRequestHead(std::string_view(text).substr(0, n));
    EXPECT_EQ(h.state, State::kIncomplete) << n << " bytes";
    EXPECT_TRUE(h.method.empty() && h.path.empty()) << n << " bytes";
  }
  EXPECT_EQ(ParseHttpRequestHead(text).state, State::kComplete);
}

TEST(HttpRequestTest, AMalformedRequestLineIsToldAsSoonAsItIsWhole) {
  for (const char* line : {
           "GET /metrics\r\n",                   // HTTP/0.9: no version
           "GET /metrics HTTP/2.0\r\n",          // not HTTP/1.x
           "GET /metrics HTTP/1.10\r\n",         // a two-digit minor version
           "GET /metrics http/1.1\r\n",          // the version is case-sensitive
           "GET  /metrics HTTP/1.1\r\n",         // two spaces, before the target
           "GET /metrics  HTTP/1.1\r\n",         // two spaces, after the target
           " GET /metrics HTTP/1.1\r\n",         // a leading space: an empty method
           "GET /metrics HTTP/1.1 \r\n",         // a trailing space
           "GET metrics HTTP/1.1\r\n",           // not origin form
           "GET http://a/metrics HTTP/1.1\r\n",  // absolute form: for proxies
           "GET * HTTP/1.1\r\n",                 // asterisk form
           "G(T /metrics HTTP/1.1\r\n",          // not a token
           "GET /met rics HTTP/1.1\r\n",         // three spaces
           "GET /m\x7f HTTP/1.1\r\n",            // not visible ASCII
           "GET /m\xc3\xa9 HTTP/1.1\r\n",        // UTF-8, not percent-encoded
           "GET /metrics HTTP/1.1\r\r\n",        // one CR too many
           "\r\n",                               // an empty line first
       }) {
    EXPECT_EQ(ParseHttpRequestHead(line).state, State::kMalformed) << line;
    EXPECT_EQ(ParseHttpRequestHead(std::string(line) + "Host: a\r\n\r\n").state, State::kMalformed) << line;
  }
  EXPECT_EQ(ParseHttpRequestHead(std::string("GET /m\0x HTTP/1.1\r\n\r\n", 21)).state, State::kMalformed);
}

TEST(HttpRequestTest, AHeadMustEndWithinTheLimit) {
  const std::string line = "GET /metrics HTTP/1.1\r\n";
  const std::string end = "\r\n";
  // Exactly at the limit, its blank line included: whole.
  const std::string fits =
      line + "X: " + std::string(kMaxHttpHeadBytes - line.size() - 5 - end.size(), 'a') + "\r\n" + end;
  ASSERT_EQ(fits.size(), kMaxHttpHeadBytes);
  EXPECT_EQ(ParseHttpRequestHead(fits).state, State::kComplete);
  // A byte more: too large, whether the blank line has come or not.
  const std::string over =
      line + "X: " + std::string(kMaxHttpHeadBytes - line.size() - 4 - end.size(), 'a') + "\r\n" + end;
  ASSERT_EQ(over.size(), kMaxHttpHeadBytes + 1);
  EXPECT_EQ(ParseHttpRequestHead(over).state, State::kTooLarge);
  EXPECT_EQ(ParseHttpRequestHead(over.substr(0, kMaxHttpHeadBytes)).state, State::kTooLarge);
  EXPECT_EQ(ParseHttpRequestHead(over.substr(0, kMaxHttpHeadBytes - 1)).state, State::kIncomplete);
  // A request line that never ends is too large too.
  EXPECT_EQ(ParseHttpRequestHead("GET /" + std::string(kMaxHttpHeadBytes, 'a')).state, State::kTooLarge);
}

}  // namespace
}  // namespace msched
