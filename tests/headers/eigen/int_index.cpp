// With Eigen's index type set to int, arena::matrix compiles without a narrowing
// (warnings are errors here): ddp converts its std::ptrdiff_t sizes to Eigen's Index.
#define EIGEN_DEFAULT_DENSE_INDEX_TYPE int
#include <ddp/ddp.hpp>

#include <Eigen/Core>

#include <type_traits>

static_assert(std::is_same_v<Eigen::Index, int>);

Eigen::Map<Eigen::MatrixXf> gradient_as_matrix(ddp::arena<float>& a) { return a.matrix(1, 4, 5); }
