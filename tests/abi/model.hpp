// The program's own types, shared by every translation unit of tests/abi (as a
// user's model header is): the only thing that differs between the translation
// units is how ddp was configured (DDP_WITH_CUDA or not, header-only or compiled once).
#ifndef DDP_TESTS_ABI_MODEL_HPP
#define DDP_TESTS_ABI_MODEL_HPP

#include <cstddef>
#include <vector>

struct abi_model {
  std::vector<float> w{1, 2}, dw{0, 0};
  template <class F> void for_each_parameter(F&& f) { f("w", w, dw); }
};

/// What a translation unit reports about the ddp it was compiled against; plain
/// types only, so it crosses between translation units of either configuration.
struct abi_side {
  const char* abi_namespace; ///< DDP_ABI_NAMESPACE, stringised
  const char* ddp_type;      ///< typeid(distributed_data_parallel<abi_model, gloo>).name()
  const char* group_type;    ///< typeid(process_group<gloo>).name()
  std::size_t ddp_size;      ///< sizeof that distributed_data_parallel
  const void* train_step;    ///< the side's code using both, kept by the linker
};

abi_side abi_host_side();
abi_side abi_cuda_side();
abi_side abi_separate_side(); ///< DDP_SEPARATE_COMPILATION, with the runtime linked

#endif // DDP_TESTS_ABI_MODEL_HPP
