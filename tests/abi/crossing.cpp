// EXPECT: undefined reference to `use(ddp::
// tests/abi/link_fail.sh builds this file twice: without DDP_WITH_CUDA (main,
// which calls use) and with it (use's definition). The declaration of use is one
// line of source, but it names a class whose layout differs between the two
// builds: the link must fail, the symbol main wants naming the ABI namespace
// without the CUDA tag and the one defined naming it with it (config.hpp).
#include "model.hpp"

#include <ddp/backend/gloo.hpp>
#include <ddp/data_parallel.hpp>

using ddp_type = ddp::distributed_data_parallel<abi_model, ddp::gloo>;

void use(ddp_type& dp);

#ifdef DDP_WITH_CUDA
void use(ddp_type& dp) { dp.module().dw[0] = 1; }
#else
int main() {
  void (*volatile f)(ddp_type&) = &use;
  return f == nullptr;
}
#endif
