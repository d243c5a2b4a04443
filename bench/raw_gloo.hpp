// The baseline the DDP benchmarks compare against: a plain Gloo context of its
// own, connected through the job's store, running Gloo's collectives directly.
#pragma once

#include <ddp/ddp.hpp>
// What the baseline borrows from ddp's Gloo backend: its device and its store adapter.
#include <ddp/detail/gloo/device.hpp>
#include <ddp/detail/gloo/store_adapter.hpp>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/alltoallv.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/scatter.h>

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

  void broadcast(float* p, std::size_t n, int root) {
    ::gloo::BroadcastOptions opts(ctx_);
    opts.setOutput(p, n);
    opts.setRoot(root);
    opts.setTag(tag_++);
    ::gloo::broadcast(opts);
  }

  /// `out` holds size() x n.
  void all_gather(const float* in, float* out, std::size_t n) {
    ::gloo::AllgatherOptions opts(ctx_);
    opts.setInput(const_cast<float*>(in), n);
    opts.setOutput(out, n * static_cast<std::size_t>(ctx_->size));
    opts.setTag(tag_++);
    ::gloo::allgather(opts);
  }

  /// Block r of `in` (n each) summed across ranks into rank r's `out`: Gloo
  /// has no reduce-scatter of its own in this API, so an all-to-all and a sum
  /// of the blocks received in rank order (ddp's path before it had its own).
  void reduce_scatter(const float* in, float* out, std::size_t n) {
    const std::size_t w = static_cast<std::size_t>(ctx_->size);
    scratch_.resize(n * w);
    ::gloo::AlltoallOptions opts(ctx_);
    opts.setInput(const_cast<float*>(in), n * w);
    opts.setOutput(scratch_.data(), n * w);
    opts.setTag(tag_++);
    ::gloo::alltoall(opts);
    std::copy(scratch_.begin(), scratch_.begin() + static_cast<std::ptrdiff_t>(n), out);
    for (std::size_t r = 1; r < w; ++r)
      ::gloo::sum<float>(out, out, scratch_.data() + r * n, n);
  }

  /// Block p of `in` (n each) to rank p, block p of `out` from it.
  void all_to_all(const float* in, float* out, std::size_t n) {
    const std::size_t w = static_cast<std::size_t>(ctx_->size);
    ::gloo::AlltoallOptions opts(ctx_);
    opts.setInput(const_cast<float*>(in), n * w);
    opts.setOutput(out, n * w);
    opts.setTag(tag_++);
    ::gloo::alltoall(opts);
  }

  /// Gloo's alltoallv with `counts[p]` elements to and from each rank p.
  void all_to_all_v(const float* in, float* out, const std::vector<std::int64_t>& out_counts,
                    const std::vector<std::int64_t>& in_counts) {
    ::gloo::AlltoallvOptions opts(ctx_);
    opts.setInput(const_cast<float*>(in), out_counts);
    opts.setOutput(out, in_counts);
    opts.setTag(tag_++);
    ::gloo::alltoallv(opts);
  }

  /// Root's `out` (size() x n) receives every rank's `in`.
  void gather(const float* in, float* out, std::size_t n, int root) {
    ::gloo::GatherOptions opts(ctx_);
    opts.setInput(const_cast<float*>(in), n);
    if (ctx_->rank == root) opts.setOutput(out, n * static_cast<std::size_t>(ctx_->size));
    opts.setRoot(root);
    opts.setTag(tag_++);
    ::gloo::gather(opts);
  }

  /// Block p of root's `in` (size() x n) to rank p's `out`.
  void scatter(const float* in, float* out, std::size_t n, int root) {
    ::gloo::ScatterOptions opts(ctx_);
    if (ctx_->rank == root) {
      std::vector<float*> blocks;
      for (int p = 0; p < ctx_->size; ++p)
        blocks.push_back(const_cast<float*>(in) + n * static_cast<std::size_t>(p));
      opts.setInputs(blocks, n);
    }
    opts.setOutput(out, n);
    opts.setRoot(root);
    opts.setTag(tag_++);
    ::gloo::scatter(opts);
  }

  /// Sums every rank's `v` into root's.
  void reduce(float* v, std::size_t n, int root) {
    ::gloo::ReduceOptions opts(ctx_);
    opts.setOutput(v, n);
    opts.setRoot(root);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
    opts.setTag(tag_++);
    ::gloo::reduce(opts);
  }

  /// A send to `peer` or a receive from it on an unbound buffer, waited for.
  void send(const float* p, std::size_t n, int peer) {
    auto buf = ctx_->createUnboundBuffer(const_cast<float*>(p), n * sizeof(float));
    buf->send(peer, p2p_slot_);
    buf->waitSend();
  }
  void recv(float* p, std::size_t n, int peer) {
    auto buf = ctx_->createUnboundBuffer(p, n * sizeof(float));
    buf->recv(peer, p2p_slot_);
    buf->waitRecv();
  }

private:
  static constexpr std::uint64_t p2p_slot_ = 0x7f00000000000000ull;
  std::vector<float> scratch_;
  std::shared_ptr<::gloo::rendezvous::Context> ctx_;
  std::uint32_t tag_ = 1;
};

} // namespace bench
