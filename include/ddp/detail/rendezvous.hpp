// What a backend needs to connect: the resolved topology, timeout, token and
// (for env:// and tcp://) the job's tcp_store. Built by init_process_group.
#ifndef DDP_DETAIL_RENDEZVOUS_HPP
#define DDP_DETAIL_RENDEZVOUS_HPP

#include <ddp/store.hpp>
#include <ddp/topology.hpp>

#include <chrono>
#include <memory>
#include <string>

DDP_BEGIN_NAMESPACE
namespace detail {

struct rendezvous {
  ddp::topology topo; ///< rank/world_size already overridden by init_options
  std::chrono::milliseconds timeout{};
  std::string token;
  std::shared_ptr<tcp_store> store; ///< null for file://
  std::string file_path;            ///< the directory of file://
};

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_RENDEZVOUS_HPP
