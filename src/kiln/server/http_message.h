// kiln's HTTP request and response: plain data that the transport (http_connection.h) fills
// and writes, the routes read and answer, and the client (http_client.h) returns. Only what
// kiln uses is here: no URL parameters, no multipart, no client address.
#pragma once
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>

namespace kiln::server {

// Header names compare without regard to case (RFC 9110 §5.1); values keep their case.
struct HeaderNameLess {
  bool operator()(std::string_view a, std::string_view b) const;
  using is_transparent = void;
};

// Header fields in name order (a name may repeat: each field is its own entry, in the order
// it was added).
class HttpHeaders {
 public:
  using Fields = std::multimap<std::string, std::string, HeaderNameLess>;

  HttpHeaders() = default;
  // Fields added in order: {{"Authorization", "Bearer k"}, {"Accept", "text/event-stream"}}.
  HttpHeaders(std::initializer_list<std::pair<std::string, std::string>> fields);

  // The value of the index-th field named `name`; empty when there is none.
  std::string get(std::string_view name, size_t index = 0) const;
  size_t count(std::string_view name) const;
  bool has(std::string_view name) const { return count(name) > 0; }
  // set(): the one field of that name from now on. add(): one more field of that name.
  // A value holding CR or LF is dropped: copied from a request into a response it would
  // split the response (header injection).
  void set(const std::string& name, const std::string& value);
  void add(const std::string& name, const std::string& value);
  void erase(std::string_view name);
  bool empty() const { return fields_.empty(); }

  Fields::const_iterator begin() const { return fields_.begin(); }
  Fields::const_iterator end() const { return fields_.end(); }

 private:
  Fields fields_;
};

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // as sent: "/v1/models/a%2Fb?x=1"
  std::string path;    // the target's path, percent-decoded: "/v1/models/a/b"
  HttpHeaders headers;
  std::string body;
};

// Writes one piece of a streamed body; false once it cannot be delivered (the client left),
// after which the producer should stop.
using BodyWriter = std::function<bool(std::string_view)>;
// Produces a streamed body through the writer, returning once the body is complete (true) or
// abandoned (false: a write failed, or producing it failed).
using BodyProducer = std::function<bool(const BodyWriter&)>;

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  // Set for a body produced while it is sent (server-sent events): the transport writes each
  // piece as its own chunk at once and ignores `body`.
  BodyProducer producer;

  // The body and its Content-Type.
  void set_content(std::string content, const std::string& content_type);
  // A streamed body of this Content-Type.
  void set_producer(const std::string& content_type, BodyProducer body_producer);
};

}  // namespace kiln::server
