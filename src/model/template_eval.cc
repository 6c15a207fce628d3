#include "model/template_eval.h"

#include <algorithm>
#include <utility>

namespace msched {
namespace {

// Magnitude past which intermediate products are rejected; far above any
// real extent.
constexpr int64_t kMaxIntermediate = int64_t{1} << 62;

}  // namespace

uint64_t Prediction::TotalBytes() const {
  uint64_t total = 0;
  for (const PredictedRegion& r : regions_) total += r.range.size();
  return total;
}

template <typename Reader>
inline bool CompiledTemplate::Value(const Expr& e, const Reader& read, const uint64_t* dims, uint64_t* out) const {
  switch (e.shape) {
    case Shape::kConstant: *out = e.value; return true;
    case Shape::kNever: return false;
    case Shape::kScaled: {
      uint64_t v = 0;
      if (!read(operands_[e.first].word, &v) || v > e.value) return false;
      *out = static_cast<uint64_t>(e.coef) * v;
      return true;
    }
    case Shape::kGeneral: return Product(e, read, dims, out);
  }
  return false;
}

template <typename Reader>
bool CompiledTemplate::Product(const Expr& e, const Reader& read, const uint64_t* dims, uint64_t* out) const {
  // 64-bit arithmetic with overflow checks: anything past kMaxIntermediate
  // fails anyway, so no wider type is needed (a 128-bit product and quotient
  // cost more than the rest of a region's evaluation).
  int64_t acc = e.coef;
  for (const Operand* o = operands_.data() + e.first; o != operands_.data() + e.first + e.count; ++o) {
    uint64_t v = 0;
    if (o->dim >= 0) {
      v = dims[o->dim];
    } else if (!read(o->word, &v)) {
      return false;
    }
    if (v > static_cast<uint64_t>(kMaxIntermediate) || __builtin_mul_overflow(acc, static_cast<int64_t>(v), &acc) ||
        acc > kMaxIntermediate || acc < -kMaxIntermediate) {
      return false;
    }
  }
  if (e.div != 1) acc /= e.div;  // > 0: Compile made any other divisor kNever
  if (__builtin_add_overflow(acc, e.add, &acc)) return false;
  if (acc < 0 || static_cast<uint64_t>(acc) > kMaxRegionBytes) return false;
  *out = static_cast<uint64_t>(acc);
  return true;
}

template <typename Reader>
uint32_t CompiledTemplate::LastSlot(int32_t list, const Reader& read, const uint64_t* dims) const {
  const ListArray& a = lists_[static_cast<size_t>(list)];
  if (dims[0] == 0 || dims[0] > a.length) return UINT32_MAX;  // no block, or past the array: nothing to tell by
  ArgSlot last = a.first;
  last.buffer_offset += dims[0] - 1;
  last.offset = static_cast<uint16_t>(last.offset + dims[0] - 1);  // < the parameter's size, itself < 2^16
  uint64_t slot = 0;
  return read(last, &slot) ? static_cast<uint32_t>(slot) : UINT32_MAX;
}

CompiledTemplate::CompiledTemplate(KernelTemplate t) : source_(std::move(t)) {
  steps_.reserve(source_.regions.size());
  for (const Region& r : source_.regions) {
    Step s;
    s.base = ResolveArgRef(source_.layout, r.base);
    s.base_offset = r.base_offset;
    s.kind = r.kind;
    s.mode = r.mode;
    if (r.list && r.list->slot_of_block.param < source_.layout.size()) {
      const ArgRef& a = r.list->slot_of_block;
      const ParamInfo& p = source_.layout[a.param];
      if (a.offset < p.size && p.size <= UINT16_MAX) {
        const ListArray array{{uint64_t{p.offset} + a.offset, a.param, a.offset, 1}, p.size - a.offset};
        auto same = std::find_if(lists_.begin(), lists_.end(), [&](const ListArray& l) {
          return l.first.param == a.param && l.first.offset == a.offset;
        });
        s.list = static_cast<int32_t>(same - lists_.begin());
        if (same == lists_.end()) lists_.push_back(array);
        s.list_slot = r.list->slot;
      }
    }
    if (r.kind == Region::Kind::kRest) {  // its extent is never evaluated
      steps_.push_back(s);
      continue;
    }
    s.extent = Compile(r.extent);
    if (r.kind == Region::Kind::kStrided) {
      s.strided = static_cast<uint32_t>(strided_.size());
      strided_.push_back(Compile(r.count));
      strided_.push_back(Compile(r.stride));
    }
    steps_.push_back(s);
  }
}

CompiledTemplate::Expr CompiledTemplate::Compile(const LinearExpr& e) {
  Expr c;
  c.first = static_cast<uint32_t>(operands_.size());
  c.coef = e.coef;
  c.div = e.div;
  c.add = e.add;
  if (e.coef != 0) {  // else its factors are never read
    for (const Factor& f : e.factors) {
      Operand o;  // a kind outside the enum stays unreadable
      if (f.kind == Factor::Kind::kArg) {
        o.word = ResolveArgRef(source_.layout, f.arg);
      } else if (f.kind >= Factor::Kind::kGridX && f.kind <= Factor::Kind::kBlockZ) {
        o.dim = static_cast<int8_t>(static_cast<int>(f.kind) - static_cast<int>(Factor::Kind::kGridX));
      }
      if (o.dim < 0 && o.word.bytes == 0) c.shape = Shape::kNever;
      operands_.push_back(o);
    }
    c.count = static_cast<uint32_t>(e.factors.size());
  }
  if (c.shape == Shape::kNever || e.div <= 0) {
    c.shape = Shape::kNever;
  } else if (c.count == 0) {  // evaluated now, once and for all
    const auto no_words = [](const ArgSlot&, uint64_t*) { return false; };
    c.shape = Value(c, no_words, nullptr, &c.value) ? Shape::kConstant : Shape::kNever;
  } else if (c.count == 1 && operands_[c.first].dim < 0 && c.coef > 0 && c.div == 1 && c.add == 0) {
    // coef * v is checked below 2^62 and then within [0, kMaxRegionBytes]:
    // together, v at most kMaxRegionBytes / coef.
    c.shape = Shape::kScaled;
    c.value = kMaxRegionBytes / static_cast<uint64_t>(c.coef);
  }
  return c;
}

template <typename Reader>
void CompiledTemplate::Run(const Reader& read, const uint64_t* dims, Prediction* out) const {
  int32_t list = -1;  // the list array whose last slot was read last: a list's regions share it
  uint32_t last_slot = 0;
  for (const Step& r : steps_) {
    if (r.list >= 0) {
      if (r.list != list) list = r.list, last_slot = LastSlot(list, read, dims);
      if (r.list_slot > last_slot) continue;  // a slot past the launch's last block's
    }
    uint64_t ptr = 0;
    const bool have_ptr = read(r.base, &ptr);
    if (have_ptr && r.kind == Region::Kind::kRest) {  // cut at its allocation's end by whoever holds the map
      out->Add({ptr, ptr + std::min(kMaxRegionBytes, UINT64_MAX - ptr)}, r.mode);
      continue;
    }
    if (!have_ptr) {
      out->CountFailure();
      continue;
    }
    uint64_t extent = 0;
    if (!Value(r.extent, read, dims, &extent)) {
      out->CountFailure(ptr);
      continue;
    }
    const uint64_t base = ptr + static_cast<uint64_t>(r.base_offset);
    if (r.base_offset >= 0 ? base < ptr : base > ptr) {  // wrapped around
      out->CountFailure(ptr);
      continue;
    }
    if (r.kind != Region::Kind::kStrided) {
      if (base + extent < base) {
        out->CountFailure(ptr);
        continue;
      }
      out->Add({base, base + extent}, r.mode);
      continue;
    }
    uint64_t count = 0, stride = 0;
    if (!Value(strided_[r.strided], read, dims, &count) || !Value(strided_[r.strided + 1], read, dims, &stride)) {
      out->CountFailure(ptr);
      continue;
    }
    if (count == 0 || extent == 0) continue;
    const __int128 last_end = static_cast<__int128>(count - 1) * stride + extent;
    if (last_end > static_cast<__int128>(kMaxRegionBytes) || base + static_cast<uint64_t>(last_end) < base) {
      out->CountFailure(ptr);
      continue;
    }
    // Pieces closer than a page merge once page-aligned; emit them as one.
    if (stride <= extent || stride - extent < kPageSize || count > kMaxStridedPieces) {
      if (stride > extent && stride - extent >= kPageSize) out->CountEnvelope();
      out->Add({base, base + static_cast<uint64_t>(last_end)}, r.mode);
      continue;
    }
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t begin = base + i * stride;
      out->AddPiece({begin, begin + extent}, r.mode);
    }
  }
}

void CompiledTemplate::Evaluate(const ArgView& args, const LaunchDims& dims, Prediction* out) const {
  const uint64_t dim_values[] = {dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0], dims.block[1], dims.block[2]};
  args.WithReader([&](const auto& read) { Run(read, dim_values, out); });
}

}  // namespace msched
