// Read by cppcheck before every file it checks (scripts/lint_changed.sh passes it with
// --include); never compiled. cppcheck 2.10 does not see that kiln::fail, a variadic template
// taking fmt::format_string, never returns, so after `KILN_CHECK(p != nullptr, ...)` (which calls
// it) or `if (!p) fail(...)` it reported every use of p as a possible null dereference. This
// plain [[noreturn]] declaration is the one it finds by name. (A --library file declaring
// kiln::fail <noreturn> did not help: measured, it added findings instead.)
namespace kiln {
[[noreturn]] void fail(...);
}  // namespace kiln
