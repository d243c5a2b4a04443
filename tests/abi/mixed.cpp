// tests/abi: one program of two translation units, side.cpp built without
// DDP_WITH_CUDA (abi_host_side) and with it (abi_cuda_side). They link, and
// ddp's ABI namespace and so its types have different names on each side
// (config.hpp's ABI tags). Without the tags both sides would name their
// distributed_data_parallel ddp::v0_1_0::distributed_data_parallel<...> with
// two layouts, and the linker would keep one side's member functions for both.
#include "model.hpp"

#include <ddp/config.hpp>

#include <doctest/doctest.h>

#include <cstring>
#include <string>

TEST_CASE("translation units built with and without DDP_WITH_CUDA use distinct ABI namespaces") {
  const abi_side host = abi_host_side();
  const abi_side cuda = abi_cuda_side();
  MESSAGE("without DDP_WITH_CUDA: ddp::" << std::string(host.abi_namespace)
                                         << ", sizeof(distributed_data_parallel) " << host.ddp_size);
  MESSAGE("with DDP_WITH_CUDA:    ddp::" << std::string(cuda.abi_namespace)
                                         << ", sizeof(distributed_data_parallel) " << cuda.ddp_size);
  // This file is built without DDP_WITH_CUDA, as the host side.
  CHECK(std::string(host.abi_namespace) == DDP_DETAIL_STR(DDP_ABI_NAMESPACE));
  CHECK(std::string(cuda.abi_namespace) == std::string(host.abi_namespace) + "_cuda");
  CHECK(std::strcmp(host.ddp_type, cuda.ddp_type) != 0);
  CHECK(std::strcmp(host.group_type, cuda.group_type) != 0);
  CHECK(host.train_step != cuda.train_step);
}

TEST_CASE("a header-only translation unit and separately compiled ones use distinct ABI namespaces") {
  // The header-only side carries its runtime inline; the separately compiled one
  // declares it and links the one definition (tests/support/runtime.cpp). One
  // function inline in one file and defined once in another would break the
  // one-definition rule: under two names, they are two functions.
  const abi_side host = abi_host_side();
  const abi_side separate = abi_separate_side();
  MESSAGE("separately compiled: ddp::" << std::string(separate.abi_namespace));
  CHECK(std::string(separate.abi_namespace) == std::string(host.abi_namespace) + "_sc");
  CHECK(std::strcmp(host.ddp_type, separate.ddp_type) != 0);
  CHECK(std::strcmp(host.group_type, separate.group_type) != 0);
  CHECK(host.train_step != separate.train_step);
}
