// The separately compiled runtime of target ddp::runtime: ddp's model-independent
// code (store, Gloo communicator, rendezvous, ...), compiled once for the
// program instead of in every file that includes ddp (docs/api.md,
// "Header-only or compiled once").
#include <ddp/runtime.hpp>
