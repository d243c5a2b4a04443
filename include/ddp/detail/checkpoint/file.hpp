// The checkpoint file: its records, their encoding (version 1, docs/checkpoints.md), the
// SHA-256 that seals it, and the atomic write and checked read of one file. Independent of
// the model's and the optimizer's types: ddp/checkpoint.hpp fills and applies the records.
#ifndef DDP_DETAIL_CHECKPOINT_FILE_HPP
#define DDP_DETAIL_CHECKPOINT_FILE_HPP

#include <ddp/detail/common/linkage.hpp>
#include <ddp/error.hpp>
#include <ddp/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

DDP_BEGIN_NAMESPACE
namespace detail {

enum class checkpoint_role : std::uint8_t { parameter = 0, buffer = 1 };

/// One tensor: its values and, for a parameter under a ddp::optim optimizer, one array of
/// per-element optimizer state per slot (Adam: two moments; SGD: momentum), in the
/// parameter's element order and dtype, whole (never a rank's shard).
struct checkpoint_tensor {
  checkpoint_role role = checkpoint_role::parameter;
  std::string name;
  dtype type = dtype::f32;
  std::uint64_t count = 0;
  std::vector<std::byte> values;
  std::vector<std::vector<std::byte>> state; ///< [slot], each count elements of `type`
};

struct checkpoint_contents {
  std::uint64_t step = 0, epoch = 0, samples = 0;
  std::uint32_t saved_world_size = 0; ///< informative: any world size loads the file
  std::string optimizer;              ///< "" (none), "adam", "sgd"
  std::uint64_t optimizer_steps = 0;
  std::uint32_t slots = 0; ///< optimizer state arrays per parameter
  std::vector<checkpoint_tensor> tensors;
};

inline constexpr char checkpoint_magic[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', '\n'};
inline constexpr std::uint32_t checkpoint_version = 1;
inline constexpr std::size_t checkpoint_header_bytes = 24; ///< magic, version, byte order, body size
inline constexpr std::size_t checkpoint_digest_bytes = 32; ///< SHA-256 of header and body

/// A file that is whole but that this ddp cannot read (another format version or byte order):
/// loading does not fall back to an earlier checkpoint for it.
class checkpoint_unreadable : public error {
public:
  explicit checkpoint_unreadable(const std::string& what) : error(error_kind::data, what) {}
};

/// The checks of the header, the length and the SHA-256: a ddp::error (data) naming `file`
/// (checkpoint_unreadable for another version or byte order) when one fails.
DDP_INLINE void check_checkpoint_integrity(const std::vector<std::uint8_t>& bytes, const std::string& file);
/// The whole file's bytes: header, body, SHA-256.
DDP_INLINE std::vector<std::uint8_t> encode_checkpoint(const checkpoint_contents& c);
/// Checks the header, the length and the SHA-256, then parses the body; every failure is a
/// ddp::error (data) that names `file` and says what is wrong with it.
DDP_INLINE checkpoint_contents decode_checkpoint(const std::vector<std::uint8_t>& bytes,
                                                 const std::string& file);
/// The file's bytes; a ddp::error naming it when it cannot be read.
DDP_INLINE std::vector<std::uint8_t> read_checkpoint_file(const std::string& file);
/// Writes `file` so that it is either the old file or the whole new one, whatever happens:
/// under flock(2) on `file.lock` (a second writer is refused, naming it), stale `file.tmp.*`
/// removed, a temporary file of its own beside it (O_EXCL; host, pid, random), fsync, close,
/// rename over it, fsync of the directory (each failure an error naming the file or directory).
/// With `keep_previous`, the file it replaces becomes `file.prev` first if it is a whole
/// checkpoint, else `file.bad` (.prev is then left as it was).
DDP_INLINE void write_checkpoint_file(const std::string& file, const std::vector<std::uint8_t>& bytes,
                                      bool keep_previous);

} // namespace detail
DDP_END_NAMESPACE

#if DDP_DETAIL_DEFINE_RUNTIME
#include <ddp/detail/checkpoint/file-inl.hpp>
#endif

#endif // DDP_DETAIL_CHECKPOINT_FILE_HPP
