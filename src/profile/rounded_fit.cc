#include "profile/rounded_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace msched {
namespace {

// The fit searches at most this many launches of a kernel (evenly spaced):
// a trace of a million launches of one kernel fits in bounded time.
constexpr size_t kMaxFitLaunches = 256;
// Products of two and three words are searched over the first candidates
// only (whole parameters first, then struct fields in order, then launch
// dimensions): all of them for one word.
constexpr size_t kPairCandidates = 40;
constexpr size_t kTripleCandidates = 20;
// Products of four words (a convolution's filter, K * C * R * S) are
// searched only for a base nothing simpler explains, over fewer candidates:
// four words fit noise too readily to compete with fewer.
constexpr size_t kQuadCandidates = 16;
// And only from this many launches of distinct extents: from fewer, some
// product of four among thousands lands in the last block by chance, and a
// rule fitted by chance would miss data at other sizes where the end of the
// allocation does not.
constexpr size_t kQuadMinExtents = 4;
constexpr int64_t kMaxDivisor = 1024;
// A rule may leave one launch in this many unexplained: the driver sometimes
// migrates a neighbouring tensor's pages with the region's (no argument
// points at them), or leaves part of the region where it was.
constexpr size_t kMissShare = 8;
constexpr int64_t kMaxCoefficient = int64_t{1} << 48;  // what a templates file accepts

// One launch's evidence for one base: the pointer and the end of the
// migrated bytes at and above it.
struct Evidence {
  uint64_t pointer;
  uint64_t end;
};

// A candidate rule's rank; lower is better.
struct Rank {
  size_t misses;  // launches whose migration the rule does not explain
  int64_t gap;    // mean log2 of migrated over predicted pages, in 1/16ths
  bool constant;  // no argument word in it
  size_t factors;
  bool odd_size;  // a coefficient other than an element size (1, 2, 4, 8 or 16 bytes)
  bool fraction;  // a coefficient with a divisor

  auto Key() const { return std::make_tuple(misses, gap, constant, odd_size, factors, fraction); }
};

class RuleSearch {
 public:
  RuleSearch(const std::vector<Evidence>& evidence, uint64_t precision)
      : evidence_(evidence), precision_(precision), allowed_misses_(evidence.size() / kMissShare) {}

  // Tries value(i) = num * product[i] / den for every launch i.
  void Try(int64_t num, int64_t den, const std::vector<__int128>& product, std::vector<Factor> factors) {
    if (num <= 0 || num > kMaxCoefficient) return;
    double gap = 0;
    size_t misses = 0;
    for (size_t i = 0; i < evidence_.size(); ++i) {
      const __int128 v = static_cast<__int128>(num) * product[i] / den;
      const Evidence& e = evidence_[i];
      const uint64_t migrated = e.end - e.pointer;
      // Reaches into the last migrated block, and not past the migrated end.
      if (v > static_cast<__int128>(migrated) ||
          e.pointer + static_cast<uint64_t>(v) <= AlignDown(e.end - 1, kChunkSize)) {
        if (++misses > allowed_misses_) return;
        continue;
      }
      const uint64_t first = AlignDown(e.pointer, precision_);
      const double predicted_units =
          static_cast<double>(AlignUp(e.pointer + static_cast<uint64_t>(v), precision_) - first);
      gap += std::log2(static_cast<double>(AlignUp(e.end, precision_) - first) / std::max(predicted_units, 1.0));
    }
    const bool element_size = den == 1 && num <= 16 && (num & (num - 1)) == 0;
    const Rank rank{misses,          std::llround(16 * gap / static_cast<double>(evidence_.size() - misses)),
                    factors.empty(), factors.size(),
                    !element_size,   den != 1};
    LinearExpr rule{num, den, std::move(factors), 0};
    if (ties_.empty() || rank.Key() < best_rank_.Key()) {
      best_rank_ = rank;
      ties_.clear();
    } else if (rank.Key() != best_rank_.Key()) {
      return;
    }
    if (std::find(ties_.begin(), ties_.end(), rule) == ties_.end()) ties_.push_back(std::move(rule));
  }

  // Tries the coefficients that can fit over `product`: whole element sizes,
  // and the largest (the tightest) num/den under every launch's migrated extent.
  void TryProduct(const std::vector<const FactorValues*>& chosen, const std::vector<size_t>& rows) {
    std::vector<__int128> product(evidence_.size(), 1);
    std::vector<double> ratios;  // migrated bytes per unit of the product
    for (size_t i = 0; i < evidence_.size(); ++i) {
      for (const FactorValues* f : chosen) {
        product[i] *= f->values[rows[i]];
        if (product[i] > (static_cast<__int128>(1) << 62)) return;
      }
      if (product[i] == 0) return;
      ratios.push_back(static_cast<double>(evidence_[i].end - evidence_[i].pointer) / static_cast<double>(product[i]));
    }
    // The largest coefficient under all launches' migrated extents but the allowed misses.
    std::nth_element(ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(allowed_misses_), ratios.end());
    const double largest = ratios[allowed_misses_];
    std::vector<Factor> factors;
    for (const FactorValues* f : chosen) factors.push_back(f->factor);
    for (int64_t element : {1, 2, 4, 8, 16}) {
      if (element <= largest) Try(element, 1, product, factors);
    }
    for (int64_t den = 1; den <= kMaxDivisor; den *= 2) {
      const double num = std::floor(largest * static_cast<double>(den));
      if (num >= 1 && num <= static_cast<double>(kMaxCoefficient)) {
        Try(static_cast<int64_t>(num), den, product, factors);
        if (num >= 64) break;  // fine enough: a finer divisor adds under 1/64
      }
    }
  }

  void TryConstant() {
    std::vector<uint64_t> migrated;
    for (const Evidence& e : evidence_) migrated.push_back(e.end - e.pointer);
    std::nth_element(migrated.begin(), migrated.begin() + static_cast<std::ptrdiff_t>(allowed_misses_), migrated.end());
    Try(static_cast<int64_t>(std::min<uint64_t>(migrated[allowed_misses_], kMaxCoefficient)), 1,
        std::vector<__int128>(evidence_.size(), 1), {});
  }

  // The best rules, equally good, in the order they were tried.
  const std::vector<LinearExpr>& best() const { return ties_; }

 private:
  const std::vector<Evidence>& evidence_;
  const uint64_t precision_;
  const size_t allowed_misses_;
  std::vector<LinearExpr> ties_;
  Rank best_rank_{};
};

size_t DistinctExtents(const std::vector<Evidence>& evidence) {
  std::set<uint64_t> extents;
  for (const Evidence& e : evidence) extents.insert(e.end - e.pointer);
  return extents.size();
}

// Evenly spaced launches, at most kMaxFitLaunches.
std::vector<const Observation*> Sample(const std::vector<const Observation*>& obs) {
  if (obs.size() <= kMaxFitLaunches) return obs;
  std::vector<const Observation*> out;
  for (size_t i = 0; i < kMaxFitLaunches; ++i) out.push_back(obs[i * obs.size() / kMaxFitLaunches]);
  return out;
}

// Where a one-word rule's word lies relative to its region's base, with the
// rule's coefficient: the count of a list's tensor sits at the same distance
// from that tensor's pointer for every slot (PyTorch's TensorListMetadata,
// cuDNN's and cuBLASLt's parameter structs), and the slots share an element
// size, while a profile at one size leaves many words that fit as well.
using CountShape = std::tuple<uint16_t, int, int64_t, int64_t>;  // param, distance, coef, div
std::optional<CountShape> CountShapeOf(const Region& region, const LinearExpr& rule) {
  if (rule.factors.size() != 1 || rule.factors[0].kind != Factor::Kind::kArg) return std::nullopt;
  const ArgRef& word = rule.factors[0].arg;
  if (word.param != region.base.param) return std::nullopt;
  return CountShape{word.param, static_cast<int>(word.offset) - static_cast<int>(region.base.offset), rule.coef,
                    rule.div};
}

// Sets each region's rule: among its equally good rules, the one of the
// shape the kernel's regions vote for; else the one with the smallest
// coefficient (fp16's 2 bytes times a count rather than 16 bytes times a
// fraction of it), the first tried among those (whole parameters before
// struct fields). A region splits one vote among the shapes its rules allow,
// so that a small tensor, which every small word fits, says little, and a
// large one, which one count fits, decides.
void ChooseByConsensus(std::vector<Region>& regions, const std::vector<std::vector<LinearExpr>>& choices) {
  std::map<CountShape, double> votes;
  for (size_t r = 0; r < regions.size(); ++r) {
    std::set<CountShape> shapes;
    for (const LinearExpr& rule : choices[r]) {
      if (auto s = CountShapeOf(regions[r], rule)) shapes.insert(*s);
    }
    for (const CountShape& s : shapes) votes[s] += 1.0 / static_cast<double>(shapes.size());
  }
  for (size_t r = 0; r < regions.size(); ++r) {
    if (choices[r].empty()) continue;
    const LinearExpr* pick = &*std::min_element(
        choices[r].begin(), choices[r].end(), [](const LinearExpr& a, const LinearExpr& b) { return a.coef < b.coef; });
    double most = 0;
    for (const LinearExpr& rule : choices[r]) {
      const auto s = CountShapeOf(regions[r], rule);
      const double v = s ? votes[*s] : 0;
      if (v > most) most = v, pick = &rule;
    }
    regions[r].extent = *pick;
    regions[r].kind = pick->IsConstant() ? Region::Kind::kFixed : Region::Kind::kLinear;
  }
}

}  // namespace

KernelFit FitRoundedKernel(const std::vector<const Observation*>& all, uint64_t precision, KernelFit fit) {
  const std::vector<const Observation*> obs = Sample(all);
  std::vector<FactorValues> fixed_sizes;
  const std::vector<FactorValues> words = CandidateFactors(obs, &fixed_sizes, /*keep_constant=*/true);
  // Products search the distinct value vectors; a product that takes one
  // twice takes its twin, if it has one, the second time: in a profile where
  // a matrix is square its rows and columns hold one value, and rows times
  // columns, not rows squared, follows the program to other shapes.
  std::vector<std::vector<const FactorValues*>> distinct;  // each: words with equal values, in order
  for (const FactorValues& w : words) {
    auto same = std::find_if(distinct.begin(), distinct.end(), [&](const auto& d) { return d[0]->values == w.values; });
    if (same == distinct.end()) {
      distinct.push_back({&w});
    } else {
      same->push_back(&w);
    }
  }
  auto product = [&](std::initializer_list<size_t> picks) {
    std::vector<const FactorValues*> chosen;
    size_t repeat = 0;
    for (auto it = picks.begin(); it != picks.end(); ++it) {
      repeat = it != picks.begin() && *it == *(it - 1) ? repeat + 1 : 0;
      const auto& twins = distinct[*it];
      chosen.push_back(twins[std::min(repeat, twins.size() - 1)]);
    }
    return chosen;
  };
  std::set<ArgRef> bases;
  for (const Observation* o : obs) {
    for (const auto& [ref, ranges] : o->by_base) bases.insert(ref);
  }
  std::vector<Region> regions;
  std::vector<std::vector<LinearExpr>> choices;  // per region: its equally good rules
  for (const ArgRef& base : bases) {
    // The launches that migrated something through this base; the others say
    // nothing (a fresh allocation's first write migrates nothing).
    std::vector<Evidence> evidence;
    std::vector<size_t> rows;
    int mode = 0;
    for (size_t i = 0; i < obs.size(); ++i) {
      auto it = obs[i]->by_base.find(base);
      const std::optional<uint64_t> pointer = obs[i]->args.Read(base);
      if (it == obs[i]->by_base.end() || !pointer) continue;
      uint64_t end = 0;
      for (const TouchedRange& r : it->second) {
        end = std::max(end, r.range.end);
        mode |= static_cast<int>(r.mode);
      }
      if (end <= *pointer) continue;
      evidence.push_back({*pointer, end});
      rows.push_back(i);
    }
    if (evidence.empty()) continue;
    RuleSearch search(evidence, precision);
    for (const FactorValues& w : words) search.TryProduct({&w}, rows);
    const size_t pairs = std::min(distinct.size(), kPairCandidates);
    const size_t triples = std::min(distinct.size(), kTripleCandidates);
    for (size_t i = 0; i < pairs; ++i) {
      for (size_t j = i; j < pairs; ++j) search.TryProduct(product({i, j}), rows);
    }
    for (size_t i = 0; i < triples; ++i) {
      for (size_t j = i; j < triples; ++j) {
        for (size_t k = j; k < triples; ++k) search.TryProduct(product({i, j, k}), rows);
      }
    }
    search.TryConstant();
    if (search.best().empty() && DistinctExtents(evidence) >= kQuadMinExtents) {
      const size_t quads = std::min(distinct.size(), kQuadCandidates);
      for (size_t i = 0; i < quads; ++i) {
        for (size_t j = i; j < quads; ++j) {
          for (size_t k = j; k < quads; ++k) {
            for (size_t l = k; l < quads; ++l) search.TryProduct(product({i, j, k, l}), rows);
          }
        }
      }
    }
    Region region;
    region.base = base;
    region.mode = static_cast<AccessMode>(mode ? mode : 1);
    region.kind = Region::Kind::kRest;  // touched, but by no rule the search knows, unless one is chosen below
    regions.push_back(region);
    choices.push_back(search.best());
  }
  ChooseByConsensus(regions, choices);
  fit.tmpl.regions = std::move(regions);
  fit.predictable = true;
  return fit;
}

}  // namespace msched
