// Device gradients where they cannot be reduced are a ddp::error at
// construction, never a crash: built without DDP_WITH_CUDA, the error says to
// link ddp::cuda; built with it on a machine without a GPU, the error names the
// CUDA call that failed. The device pointers are fake: nothing may touch them.
// (On a machine with a GPU the second form does not apply: it exits 77.)
#include <ddp/ddp.hpp>

#include <cstdio>
#include <string>

struct device_model {
  ddp::device_span<float> w{reinterpret_cast<float*>(0x1000), 4}, dw{reinterpret_cast<float*>(0x2000), 4};
  template <class F> void for_each_parameter(F&& f) { f("layer.weight", w, dw); }
};

int main() {
#ifdef DDP_WITH_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    std::puts("SKIP: a CUDA device is present (this checks the error without one)");
    return 77;
  }
  const std::string expected = "failed: ";
  const ddp::error_kind kind = ddp::error_kind::backend;
#else
  const std::string expected = "compiled without its CUDA engine";
  const ddp::error_kind kind = ddp::error_kind::config;
#endif
  auto pg = ddp::init_process_group<ddp::gloo>();
  device_model m;
  try {
    ddp::distributed_data_parallel dp(m, pg);
    std::puts("FAILED: device gradients were accepted");
    return 1;
  } catch (const ddp::error& e) {
    const std::string what = e.what();
    std::printf("error: %s\n", e.what());
    if (e.kind() != kind || what.find(expected) == std::string::npos) {
      std::printf("FAILED: expected a %s error containing '%s'\n",
                  kind == ddp::error_kind::config ? "config" : "backend", expected.c_str());
      return 1;
    }
  }
  std::puts("ok");
  return 0;
}
