// detail::message and detail::throw_error: ddp/detail/common/message.hpp. Every
// throw site that passes its pieces there must say what its string chain said.
#include <ddp/detail/common/message.hpp>
#include <ddp/error.hpp>

#include <doctest/doctest.h>

#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

using ddp::detail::message;

TEST_CASE("integers print as std::to_string prints them") {
  CHECK(message({INT_MIN, " ", INT_MAX}) == std::to_string(INT_MIN) + " " + std::to_string(INT_MAX));
  CHECK(message({LLONG_MIN, "|", LLONG_MAX, "|", ULLONG_MAX}) ==
        std::to_string(LLONG_MIN) + "|" + std::to_string(LLONG_MAX) + "|" + std::to_string(ULLONG_MAX));
  const short s = -7;
  const unsigned char b = 200;
  const std::size_t z = 0;
  const long l = -1234567890123L;
  const std::uint32_t u = 4000000000u;
  CHECK(message({s, b, z, l, u}) ==
        std::to_string(s) + std::to_string(b) + std::to_string(z) + std::to_string(l) + std::to_string(u));
}

TEST_CASE("text pieces: literals, strings, views and temporaries") {
  const std::string name = "fc1.weight";
  const std::string_view view = "float32";
  auto where = [] { return std::string("127.0.0.1:29500"); }; // a temporary lives through the call
  CHECK(message({"parameter '", name, "' is ", view, " at ", where(), ""}) ==
        "parameter 'fc1.weight' is float32 at 127.0.0.1:29500");
  CHECK(message({}).empty());
}

TEST_CASE("characters and bool are no integers: `text + 'c'` appends a character") {
  static_assert(ddp::detail::message_integer<int> && ddp::detail::message_integer<unsigned long>);
  static_assert(!ddp::detail::message_integer<char> && !ddp::detail::message_integer<bool>);
  static_assert(!ddp::detail::message_integer<double>);
  // Nor does a message_part take one by another road (a conversion to an integer or a view).
  using ddp::detail::message_part;
  static_assert(std::is_constructible_v<message_part, int> &&
                std::is_constructible_v<message_part, std::size_t>);
  static_assert(!std::is_constructible_v<message_part, char>);
  static_assert(!std::is_constructible_v<message_part, bool>);
  static_assert(!std::is_constructible_v<message_part, double>);
  static_assert(!std::is_constructible_v<message_part, float>);
}

TEST_CASE("integers wider than 64 bits do not compile: they would print cut short") {
  static_assert(ddp::detail::message_integer<long long> && ddp::detail::message_integer<unsigned long long>);
#ifdef __SIZEOF_INT128__
  // The tests build as gnu++20, where std::integral<__int128> holds: the size is what rejects it.
  static_assert(!ddp::detail::message_integer<__int128> && !ddp::detail::message_integer<unsigned __int128>);
  static_assert(!std::is_constructible_v<ddp::detail::message_part, __int128>);
  static_assert(!std::is_constructible_v<ddp::detail::message_part, unsigned __int128>);
#endif
}

TEST_CASE("append_message appends to what is there, as += message(...) did") {
  std::string s = "collective 7";
  ddp::detail::append_message(s, {" of ", std::size_t{1024}, " x ", "float32"});
  CHECK(s == "collective 7 of 1024 x float32");
  ddp::detail::append_message(s, {});
  CHECK(s == "collective 7 of 1024 x float32");
  // Built piece by piece in a loop, as the trace's JSON is: the same text as one chain.
  std::string j, expected;
  for (int i = 0; i < 1000; ++i) {
    ddp::detail::append_message(j, {i ? "," : "", "{\"id\":", i, "}"});
    expected += (i ? "," : "") + std::string("{\"id\":") + std::to_string(i) + "}";
  }
  CHECK(j == expected);
}

TEST_CASE("throw_error throws the error the site's own throw made") {
  try {
    ddp::detail::throw_error(ddp::error_kind::peer_lost, {"rank ", 3, " left: ", std::string("bye")}, 3);
    FAIL("no throw");
  } catch (const ddp::error& e) {
    CHECK(e.kind() == ddp::error_kind::peer_lost);
    CHECK(e.rank() == 3);
    CHECK(std::string(e.what()) == "ddp peer_lost error: rank 3 left: bye");
    CHECK(e.message() == "rank 3 left: bye");
  }
  // A config error that begins "rank N:" is about rank N, as a constructed one is.
  try {
    ddp::detail::throw_error(ddp::error_kind::config, {"rank ", 12, ": bad option"});
    FAIL("no throw");
  } catch (const ddp::error& e) {
    CHECK(e.rank() == 12);
    CHECK(std::string(e.what()) == ddp::error(ddp::error_kind::config, "rank 12: bad option").what());
  }
}
