// The slot prefixes of ddp's own collectives over Gloo's transport, in one
// place so that none collides with another's or with Gloo's (its own
// collectives use 0x01..0x08). A slot is a prefix and the collective's tag.
#ifndef DDP_DETAIL_GLOO_SLOTS_HPP
#define DDP_DETAIL_GLOO_SLOTS_HPP

#include <ddp/config.hpp>

#include <cstdint>

DDP_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint8_t ring_slot_prefix = 0x40;   ///< fragment_ring (detail/gloo/ring.hpp)
inline constexpr std::uint8_t header_slot_prefix = 0x41; ///< header_round (detail/gloo/header.hpp)
inline constexpr std::uint8_t chain_slot_prefix = 0x42;  ///< chain_broadcast (detail/gloo/chain.hpp)
inline constexpr std::uint8_t block_exchange_slot_prefix =
    0x43; ///< exchange_blocks (detail/gloo/exchange.hpp)
/// send/recv (detail/gloo/p2p.hpp): a message's headers, then its data, by
/// direction (from a lower rank to a higher one, or back). Their tag is the
/// message's number in its lane, not the group's.
inline constexpr std::uint8_t p2p_up_header_slot_prefix = 0x44;
inline constexpr std::uint8_t p2p_up_data_slot_prefix = 0x45;
inline constexpr std::uint8_t p2p_down_header_slot_prefix = 0x47;
inline constexpr std::uint8_t p2p_down_data_slot_prefix = 0x48;
/// exchange_v (detail/gloo/exchange.hpp): all_to_all, gather, scatter, reduce
inline constexpr std::uint8_t exchange_v_slot_prefix = 0x46;

} // namespace detail
DDP_END_NAMESPACE

#endif // DDP_DETAIL_GLOO_SLOTS_HPP
