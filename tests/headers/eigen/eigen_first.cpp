// Eigen included before ddp: ddp's declarations of Eigen's templates come after
// Eigen's own definitions (tests/headers/eigen/ddp_first.cpp is the other order).
#include <Eigen/Core>

#include <ddp/ddp.hpp>

#include <type_traits>

static_assert(ddp::tensor<Eigen::MatrixXf>);
static_assert(ddp::tensor<Eigen::Map<Eigen::VectorXd>>);
static_assert(ddp::dtype_of<Eigen::half>::value == ddp::dtype::f16);
static_assert(ddp::dtype_of<Eigen::bfloat16>::value == ddp::dtype::bf16);

Eigen::Map<Eigen::MatrixXf> gradient_as_matrix(ddp::arena<float>& a) { return a.matrix(0, 2, 3); }
