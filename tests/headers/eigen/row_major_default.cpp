// Under EIGEN_DEFAULT_TO_ROW_MAJOR, arena::matrix is still the column-major map
// its documentation promises (Eigen's default order does not change ddp's layout).
#define EIGEN_DEFAULT_TO_ROW_MAJOR
#include <ddp/ddp.hpp>

#include <Eigen/Core>

#include <type_traits>

using map = decltype(std::declval<ddp::arena<double>&>().matrix(0, 2, 3));
static_assert(!map::IsRowMajor, "arena::matrix must stay column-major");
static_assert(Eigen::MatrixXd::IsRowMajor, "this file must build with Eigen's row-major default");
static_assert(ddp::tensor<Eigen::MatrixXd>);
