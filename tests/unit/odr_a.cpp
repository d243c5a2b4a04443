// Two translation units that both include everything ddp has: linking them
// proves every non-template function is inline (no duplicate symbols).
#include <ddp/data/cifar10.hpp>
#include <ddp/data/idx.hpp>
#include <ddp/ddp.hpp>

#include <doctest/doctest.h>

std::string version_from_b();
std::size_t sampler_size_from_b();

TEST_CASE("two translation units link and agree") {
  CHECK(version_from_b() == std::string(ddp::version().string));
  ddp::distributed_sampler<> s(10, 3, 1);
  CHECK(sampler_size_from_b() == s.size());
  CHECK(ddp::detail::parse_timeout("30s").count() == 30000);
}

TEST_CASE("version macros, string and function agree") {
  constexpr auto v = ddp::version();
  static_assert(v.major == DDP_VERSION_MAJOR && v.minor == DDP_VERSION_MINOR && v.patch == DDP_VERSION_PATCH);
  CHECK(v.string == std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch));
  CHECK(std::string(v.string) == DDP_PROJECT_VERSION); // the CMake project version
}
