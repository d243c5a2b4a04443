// ddp before Eigen, and ddp's templates named before Eigen is included: ddp's
// declarations of Eigen's templates carry no default arguments, Eigen's give them.
#include <ddp/ddp.hpp>

template <class T> float first_of(ddp::arena<T>& a) { return a.matrix(0, 1, 1)(0, 0); }

#include <Eigen/Core>

static_assert(ddp::tensor<Eigen::MatrixXf>);
static_assert(ddp::tensor<Eigen::Ref<Eigen::VectorXf>>);

float use(ddp::arena<float>& a) { return first_of(a); }
