// DDP_TIMEOUT: ddp/detail/common/timeout.hpp; ddp::error: ddp/error.hpp.
#include <ddp/detail/common/timeout.hpp>
#include <ddp/error.hpp>

#include "../support/env_guard.hpp"

#include <doctest/doctest.h>

TEST_CASE("DDP_TIMEOUT parsing") {
  using ddp::detail::parse_timeout;
  CHECK(parse_timeout("600").count() == 600000);
  CHECK(parse_timeout("500ms").count() == 500);
  CHECK(parse_timeout("2m").count() == 120000);
  for (const char* bad : {"", "0", "-5", "abc", "10h", "s", "1.5s"})
    CHECK_THROWS_AS(parse_timeout(bad), ddp::error);
}

TEST_CASE("DDP_TIMEOUT sets the default timeout; unset means 10 minutes") {
  {
    ddp_test::env_guard g(std::map<std::string, std::string>{{"DDP_TIMEOUT", "45s"}});
    CHECK(ddp::detail::default_timeout().count() == 45000);
  }
  {
    ddp_test::env_guard g; // clears DDP_TIMEOUT
    CHECK(ddp::detail::default_timeout() == std::chrono::minutes(10));
  }
  ddp_test::env_guard g(std::map<std::string, std::string>{{"DDP_TIMEOUT", "soon"}});
  CHECK_THROWS_AS(ddp::detail::default_timeout(), ddp::error);
}

TEST_CASE("ddp::error: what() names the kind; message() is the text alone") {
  const ddp::error e(ddp::error_kind::timeout, "rank 2 stalled", 2);
  CHECK(std::string(e.what()) == "ddp timeout error: rank 2 stalled");
  CHECK(e.message() == "rank 2 stalled");
  CHECK(ddp::error(ddp::error_kind::config, "").message().empty());
}
