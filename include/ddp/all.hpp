// ddp — header-only distributed data-parallel training for C++20.
// The convenience header: the core (<ddp/ddp.hpp>) and every optional feature.
// Each feature's own header is cheaper to compile where only it is needed.
#ifndef DDP_ALL_HPP
#define DDP_ALL_HPP

#include <ddp/ddp.hpp>

#include <ddp/checkpoint.hpp>
#include <ddp/elastic.hpp>
#include <ddp/global_batches.hpp>
#include <ddp/hybrid_groups.hpp>
#include <ddp/sharded_data_parallel.hpp>
#include <ddp/step_batches.hpp>
#include <ddp/sync_batch_stats.hpp>

#endif // DDP_ALL_HPP
