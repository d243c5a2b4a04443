// The baseline the DDP benchmarks compare against: a plain Gloo context of its
// own, connected through the job's store, running gloo::allreduce directly.
#pragma once

#include <ddp/ddp.hpp>

#include <gloo/allreduce.h>
#include <gloo/math.h>

namespace bench {

class raw_gloo {
public:
  template <class PG> explicit raw_gloo(PG& pg, const std::string& prefix) {
    const auto& t = pg.topology();
    auto device = ddp::detail::make_gloo_device({t.rank, t.local_rank, t.master_addr, t.master_port});
    ctx_ = std::make_shared<::gloo::rendezvous::Context>(pg.rank(), pg.size());
    ctx_->setTimeout(std::chrono::seconds(300));
    ddp::detail::gloo_store_adapter adapter(*pg.store(), prefix);
    ctx_->connectFullMesh(adapter, device);
  }

  /// Sums `v` across ranks in place, as a user of plain Gloo would.
  void all_reduce(std::vector<float>& v) { all_reduce(v.data(), v.size()); }
  void all_reduce(float* p, std::size_t n) {
    ::gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(p, n);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
    opts.setTag(tag_++);
    ::gloo::allreduce(opts);
  }

private:
  std::shared_ptr<::gloo::rendezvous::Context> ctx_;
  std::uint32_t tag_ = 1;
};

} // namespace bench
