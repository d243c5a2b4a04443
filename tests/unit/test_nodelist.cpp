#include <ddp/detail/topology/nodelist.hpp>

#include <doctest/doctest.h>

using ddp::detail::expand_nodelist;
using V = std::vector<std::string>;

TEST_CASE("plain names and lists") {
  CHECK(expand_nodelist("node1") == V{"node1"});
  CHECK(expand_nodelist("a,b,c") == V{"a", "b", "c"});
}

TEST_CASE("zero-padded ranges and lists inside brackets") {
  CHECK(expand_nodelist("gpu[01-03,07],cpu5") == V{"gpu01", "gpu02", "gpu03", "gpu07", "cpu5"});
  CHECK(expand_nodelist("n[8-11]") == V{"n8", "n9", "n10", "n11"});
  CHECK(expand_nodelist("n[098-101]") == V{"n098", "n099", "n100", "n101"});
  CHECK(ddp::detail::first_node("gpu[01-03,07],cpu5") == "gpu01");
}

TEST_CASE("several bracket groups expand as a product") {
  CHECK(expand_nodelist("rack[1-2]-n[01-02]") == V{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"});
  CHECK(expand_nodelist("a[1,3]b,c[5-6]") == V{"a1b", "a3b", "c5", "c6"});
}

TEST_CASE("malformed lists are config errors that quote the list") {
  for (const char* bad : {"", "a[1-", "a]", "a[3-1]", "a[x]", "a,,b", "a[1,]", "a[[1]]"}) {
    CAPTURE(bad);
    try {
      expand_nodelist(bad);
      FAIL("expected an error");
    } catch (const ddp::error& e) {
      CHECK(e.kind() == ddp::error_kind::config);
      CHECK(std::string(e.what()).find("'" + std::string(bad) + "'") != std::string::npos);
    }
  }
}
