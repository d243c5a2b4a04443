// ddp — header-only distributed data-parallel training for C++20.
// The umbrella header: the core of data-parallel training for the Gloo backend.
// Optional features have their own headers (<ddp/elastic.hpp>, <ddp/checkpoint.hpp>,
// <ddp/sharded_data_parallel.hpp>, ...); <ddp/all.hpp> includes every one.
#ifndef DDP_DDP_HPP
#define DDP_DDP_HPP

#include <ddp/arena.hpp>
#include <ddp/backend/communicator.hpp>
#include <ddp/backend/gloo.hpp>
#include <ddp/bucketing.hpp>
#include <ddp/config.hpp>
#include <ddp/data_parallel.hpp>
#include <ddp/error.hpp>
#include <ddp/flat_model.hpp>
#include <ddp/model.hpp>
#include <ddp/op.hpp>
#include <ddp/optim/adam.hpp>
#include <ddp/optim/sgd.hpp>
#include <ddp/process_group.hpp>
#include <ddp/reduction.hpp>
#include <ddp/sampler.hpp>
#include <ddp/store.hpp>
#include <ddp/tensor.hpp>
#include <ddp/topology.hpp>
#include <ddp/work.hpp>
// The NCCL backend joins when the build says so (target ddp::nccl defines DDP_WITH_NCCL).
#if defined(DDP_WITH_NCCL)
#include <ddp/backend/nccl.hpp>
#endif

#endif // DDP_DDP_HPP
