// Request framing checks the transport leaves to the server. Boost.Beast's parser already
// rejects a Content-Length that is not a number, several that disagree, and Content-Length
// together with chunked Transfer-Encoding; these checks state the same rules on the parsed
// request (and catch a Transfer-Encoding whose last coding is not chunked), so no request
// whose end cannot be trusted is ever routed.
#pragma once
#include <string>
#include <vector>

#include "kiln/server/http_message.h"

namespace kiln::server {

// True when the request announces a body: a Content-Length other than 0, or any
// Transfer-Encoding.
bool declares_body(const HttpRequest& req);

// Why the request's framing cannot be trusted (empty when it can): a Content-Length that is not
// a decimal number, several Content-Lengths that disagree, both Content-Length and
// Transfer-Encoding (the classic smuggling ambiguity; RFC 9112 §6.1 lets a server reject it),
// a Transfer-Encoding whose last coding is not chunked (RFC 9112 §6.3), or chunked applied more
// than once (§7.1: a sender must not).
std::string framing_problem(const HttpRequest& req);

// The request's transfer codings, lowercased and without parameters, in order. Several
// Transfer-Encoding fields make one list (RFC 9110 §5.3); empty list elements are skipped.
std::vector<std::string> transfer_codings(const HttpRequest& req);

// The first transfer coding the server cannot decode (empty when there is none): kiln decodes
// only chunked, so "gzip, chunked" names gzip. Such a request is answered 501, as RFC 9112 §6.1
// asks; its body, still encoded once chunked is undone, must never be read as JSON.
std::string unsupported_transfer_coding(const HttpRequest& req);

// Marks `res`: the connection closes once it is written ("Connection: close").
void close_after_response(HttpResponse& res);

}  // namespace kiln::server
