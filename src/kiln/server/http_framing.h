// Request framing on a kept-alive connection, where cpp-httplib 0.11 (the version Debian ships)
// falls short in ways a hostile or merely unusual client can exploit:
//  - a request it answers without reading the body (a 401 from the pre-routing handler, a
//    malformed request line, a GET with a body) keeps the connection open, so the body's bytes
//    are parsed as the next request ("request smuggling");
//  - a POST with neither Content-Length nor Transfer-Encoding is read until the client closes
//    the connection, although RFC 9112 §6.3 says its body is empty.
// The server therefore checks framing before routing (framing_problem, has_no_body), and every
// response to a request whose body may be unread is marked with close_after_response; the
// post-routing hook (end_marked_connection) makes httplib really close those connections, which
// 0.11 only does when the *client* asked for it.
#pragma once
#include <httplib.h>

#include <string>

namespace kiln::server {

// True when the request announces a body: a Content-Length other than 0, or any
// Transfer-Encoding.
bool declares_body(const httplib::Request& req);

// True for the methods whose body httplib 0.11 reads before routing (POST, PUT, PATCH, DELETE);
// for the others (GET, HEAD, OPTIONS) a declared body is left on the connection.
bool httplib_reads_body(const std::string& method);

// A method httplib reads a body for, announced without Content-Length or Transfer-Encoding:
// the body is empty (RFC 9112 §6.3), and the server must route it itself because httplib 0.11
// would wait for the connection to close (60 s, then a 400).
bool has_no_body(const httplib::Request& req);

// Why the request's framing cannot be trusted (empty when it can): a Content-Length that is not
// a decimal number, several Content-Lengths that disagree, or both Content-Length and
// Transfer-Encoding (the classic smuggling ambiguity; RFC 9112 §6.1 lets a server reject it).
std::string framing_problem(const httplib::Request& req);

// Marks `res`: the connection closes once it is written ("Connection: close").
void close_after_response(httplib::Response& res);

// For the post-routing hook: when `res` is marked, or `req` declared a body that httplib left
// unread, makes writing `res` end the connection. httplib 0.11 keeps a connection open unless
// the client asked otherwise or a write failed, so the body is handed over as a content
// provider that writes it and then reports failure: the client gets the whole response (its
// Content-Length is kept), then the connection closes. A streamed response (already a
// provider) is left alone: streams are answers to POSTs whose bodies were read.
void end_marked_connection(const httplib::Request& req, httplib::Response& res);

}  // namespace kiln::server
