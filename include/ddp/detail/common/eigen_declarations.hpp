// Eigen's templates that ddp names, declared as Eigen declares them, so that
// ddp's traits for Eigen objects cost a file nothing until the file includes
// Eigen itself (parsing <Eigen/Core> is about a second of every compile, and
// only a file that holds Eigen objects needs it). The declarations carry no
// default arguments: Eigen's own give them, before or after these.
#ifndef DDP_DETAIL_COMMON_EIGEN_DECLARATIONS_HPP
#define DDP_DETAIL_COMMON_EIGEN_DECLARATIONS_HPP

namespace Eigen {
template <typename Derived> class DenseBase;
template <typename Scalar, int Rows, int Cols, int Options, int MaxRows, int MaxCols> class Matrix;
template <int OuterStrideAtCompileTime, int InnerStrideAtCompileTime> class Stride;
template <typename PlainObjectType, int MapOptions, typename StrideType> class Map;
template <typename PlainObjectType, int Options, typename StrideType> class Ref;
template <typename XprType, int BlockRows, int BlockCols, bool InnerPanel> class Block;
struct half;
struct bfloat16;
} // namespace Eigen

#endif // DDP_DETAIL_COMMON_EIGEN_DECLARATIONS_HPP
