// BlockSource: the blocks and events of one segment of PT, from QueryWalker or from libipt's block
// decoder (the same blocks and events: see query_walker.h), behind one interface for the
// FlowDecoder's loop. What the walker does not model reads as the end of the trace, and refused()
// then says to decode the same bytes again with libipt.
#pragma once

#include <intel-pt.h>

#include <memory>

#include "flow/code_images.h"
#include "flow/query_walker.h"
#include "flow/query_walker_step.h"

namespace ptscope::decode {

class BlockSource {
 public:
  explicit BlockSource(const ThreadImage& image) : walker_code_(image) {}
  ~BlockSource() { Close(); }
  BlockSource(const BlockSource&) = delete;
  BlockSource& operator=(const BlockSource&) = delete;

  // Walk with QueryWalker, sharing a worker's cache of decoded code (default: libipt), reading
  // packets with our PacketQuery when `own_packets` (else libipt's query decoder).
  void UseWalker(WalkerCache* cache, bool own_packets = false) {
    walker_cache_ = cache;
    own_packets_ = own_packets;
  }
  // Starts a segment (`config` as for pt_blk_alloc_decoder); false when it cannot be decoded.
  bool Open(const pt_config& config) {
    if (walker_cache_ != nullptr) {
      walker_ = std::make_unique<QueryWalker>(config, walker_code_, walker_cache_, own_packets_);
      walker_packets_refused_ = false;
      if (!walker_->ok()) {
        walker_.reset();
      } else {
        walker_->NotifyPacketsRefused(&walker_packets_refused_);
      }
    } else {
      decoder_ = pt_blk_alloc_decoder(&config);
    }
    return active();
  }
  void Close() {
    if (walker_ != nullptr && walker_->packets_refused()) refused_ = packets_refused_ = true;
    if (decoder_ != nullptr) pt_blk_free_decoder(decoder_);
    decoder_ = nullptr;
    walker_.reset();
  }
  bool active() const { return decoder_ != nullptr || walker_ != nullptr; }
  bool refused() const { return refused_ || packets_refused(); }
  // Refused because of packets PacketQuery does not model (libipt's query decoder may walk them).
  bool packets_refused() const {
    return packets_refused_ || (walker_ != nullptr && walker_->packets_refused());
  }
  // The code's epoch changed: `image` is the one to read from now.
  void ImageChanged(pt_image* image) {
    if (decoder_ != nullptr) pt_blk_set_image(decoder_, image);
    if (walker_ != nullptr) walker_->CodeChanged();
  }

  int SyncForward() { return walker_ ? Refused(walker_->SyncForward()) : pt_blk_sync_forward(decoder_); }
  int SyncSet(uint64_t offset) {
    return walker_ ? Refused(walker_->SyncSet(offset)) : pt_blk_sync_set(decoder_, offset);
  }
  // `call_size`: the length of the call that ends the block when the walker knows it
  // (QueryWalker::last_call_size), else 0. `at`: QueryWalker::QuietBlocks::next, or nullptr.
  [[gnu::always_inline]] int NextBlock(pt_block* block, uint8_t* call_size,
                                       const WalkerRun* at = nullptr) {
    if (walker_) {
      const int status = Refused(walker_->NextInline(block, at));
      *call_size = walker_->last_call_size();
      return status;
    }
    *call_size = 0;
    return pt_blk_next(decoder_, block, sizeof *block);
  }
  // QueryWalker::NextQuiet; none with libipt's block decoder, or once PacketQuery refused (then
  // NextBlock ends the trace: Refused).
  [[gnu::always_inline]] QueryWalker::QuietBlocks NextQuiet(const QueryWalker::QuietBounds& bounds,
                                                             uint64_t budget) {
    if (walker_ == nullptr || walker_packets_refused_) return {};
    return walker_->NextQuiet(bounds, budget);
  }
  int NextEvent(pt_event* event) {
    return walker_ ? Refused(walker_->Event(event)) : pt_blk_event(decoder_, event, sizeof *event);
  }
  // NextEvent when the next event is the walker's tick (QueryWalker::TakeTick): true, with
  // NextEvent's status in `*status` and the tick's time; false, with nothing taken, for any
  // other event and with libipt.
  [[gnu::always_inline]] bool NextTick(int* status, bool* has_tsc, uint64_t* tsc) {
    if (!walker_ || !walker_->TakeTick(status, has_tsc, tsc)) return false;
    *status = Refused(*status);
    return true;
  }
  int Time(uint64_t* tsc, uint32_t* lost_mtc, uint32_t* lost_cyc) const {
    return walker_ ? walker_->Time(tsc, lost_mtc, lost_cyc)
                   : pt_blk_time(decoder_, tsc, lost_mtc, lost_cyc);
  }
  int Offset(uint64_t* offset) const {
    return walker_ ? walker_->GetOffset(offset) : pt_blk_get_offset(decoder_, offset);
  }
  int SyncOffset(uint64_t* offset) const {
    return walker_ ? walker_->GetSyncOffset(offset) : pt_blk_get_sync_offset(decoder_, offset);
  }

 private:
  int Refused(int status) {
    if (status != QueryWalker::kUnsupported && !walker_packets_refused_) [[likely]] {
      return status;
    }
    refused_ = true;
    return -pte_eos;
  }

  pt_block_decoder* decoder_ = nullptr;  // of the segment being decoded (libipt's)
  std::unique_ptr<QueryWalker> walker_;  // of the segment being decoded (the walker)
  ThreadImageCode walker_code_;
  WalkerCache* walker_cache_ = nullptr;  // non-null: decode with the walker
  bool refused_ = false;
  bool own_packets_ = false;
  bool packets_refused_ = false;
  // The walker's packets_refused(), as a member (the walker sets it through
  // QueryWalker::NotifyPacketsRefused): Refused tests it for every block.
  bool walker_packets_refused_ = false;
};

}  // namespace ptscope::decode
