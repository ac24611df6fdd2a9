// Text and SVG renderings of a partition.
#include "compiler/Partition/Report.h"

#include "llvm/ADT/StringExtras.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace weft::partition {
namespace {

// Memory in GiB, as nvidia-smi and weft-inspect show it.
std::string gbText(uint64_t bytes) {
  return llvm::formatv("{0:f2} GiB", double(bytes) / double(1ull << 30));
}

std::string layerRange(const Candidate &c, int device) {
  for (const Stage &s : c.stages)
    if (llvm::is_contained(s.devices, device))
      return llvm::formatv("{0}-{1}", s.firstLayer, s.endLayer - 1);
  return "-";
}

std::string throughputText(const Candidate &c, const PartitionOptions &o) {
  return llvm::formatv("batch 1: {0:f1} tok/s ({1:f2} ms/token); batch {2}: "
                       "{3:f1} tok/s total, {4:f1} tok/s per stream",
                       c.tokensPerSecondBatch1, c.latencySeconds * 1e3, o.batch,
                       c.tokensPerSecond, c.tokensPerSecond / double(o.batch));
}

// The sequences one stage runs per step: a micro-batch of the batch, or
// the whole batch; and its label ("mb=16" or "b=32").
int64_t stepBatch(const Candidate &c, const PartitionOptions &o) {
  return c.microBatches > 1 ? (o.batch + c.microBatches - 1) / c.microBatches : o.batch;
}
std::string stepBatchLabel(const Candidate &c, const PartitionOptions &o) {
  return (c.microBatches > 1 ? "mb=" : "b=") + std::to_string(stepBatch(c, o));
}

// "int4 weights" or "int4 weights, int8 LM head" (--lm-head-dtype).
std::string weightsText(const PartitionOptions &o) {
  std::string s = std::string(weightDTypeName(o.weights.dtype)) + " weights";
  if (o.weights.lmHead)
    s += std::string(", ") + weightDTypeName(*o.weights.lmHead) + " LM head";
  return s;
}

} // namespace

void printPartitionSummary(const PartitionResult &r, const hardware::Topology &t,
                           const PartitionOptions &o, const ModelConfig &config,
                           llvm::raw_ostream &os) {
  const Candidate &best = r.best;
  os << llvm::formatv("partition    {0} on {1}: objective {2}, batch {3}, "
                      "context {4}, {5}\n",
                      config.name, t.name,
                      o.objective == Objective::Latency ? "latency" : "throughput",
                      o.batch, o.context, weightsText(o));
  os << "chosen       " << best.description << "\n";
  os << "             " << throughputText(best, o) << "\n";
}

void printPartitionReport(const PartitionResult &r, const hardware::Topology &t,
                          const PartitionOptions &o, const ModelConfig &config,
                          llvm::raw_ostream &os) {
  const Candidate &best = r.best;
  printPartitionSummary(r, t, o, config, os);
  if (r.memoryProportional) {
    const Candidate &m = *r.memoryProportional;
    os << "memory split " << m.description << (m.fits ? "" : " (does not fit)") << "\n";
    os << "             " << throughputText(m, o) << "\n";
    if (m.fits && m.score(o.objective) > 0)
      os << llvm::formatv("             chosen / memory split: {0:f3}x\n",
                          best.score(o.objective) / m.score(o.objective));
  }
  // Which figures the predictions rest on: measured on the device, or the
  // datasheet's (docs/cost-model.md).
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const hardware::DeviceProfile &d = t.devices[i];
    std::string label = i == 0 ? "figures      " : "             ";
    if (!d.calibration) {
      os << llvm::formatv("{0}{1}#{2}: datasheet (not calibrated)\n", label, d.name, i);
      continue;
    }
    const hardware::DeviceCalibration &c = *d.calibration;
    std::vector<std::string> parts;
    parts.push_back(c.copyBandwidth > 0
                        ? llvm::formatv("bandwidth {0:f0} GB/s measured", c.copyBandwidth / 1e9)
                              .str()
                        : std::string("bandwidth from the datasheet"));
    parts.push_back(c.gemmFlops > 0
                        ? llvm::formatv("GEMM {0:f1} TFLOPS measured", c.gemmFlops / 1e12).str()
                        : std::string("GEMM rate from the datasheet"));
    if (c.launchSeconds > 0)
      parts.push_back(llvm::formatv("launch {0:f1} us", c.launchSeconds * 1e6).str());
    if (!c.steps.empty())
      parts.push_back(llvm::formatv("decode step scales at {0}-{1} tokens",
                                    c.steps.front().tokens, c.steps.back().tokens)
                          .str());
    if (!c.prefillSteps.empty())
      parts.push_back(llvm::formatv("prefill scales at {0}-{1} tokens",
                                    c.prefillSteps.front().tokens, c.prefillSteps.back().tokens)
                          .str());
    os << llvm::formatv("{0}{1}#{2}: calibrated on {3}{4}: {5}\n", label, d.name, i, c.gpu,
                        c.date.empty() ? "" : " " + c.date, llvm::join(parts, ", "));
  }

  for (const hardware::AllReduceCalibration &a : t.allReduces) {
    std::vector<std::string> group;
    for (int d : a.devices)
      group.push_back("#" + std::to_string(d));
    os << llvm::formatv("             all-reduce over {0}: measured{1} at {2}-{3} bytes, "
                        "{4:f1}-{5:f1} us\n",
                        llvm::join(group, ","), a.method.empty() ? "" : " (" + a.method + ")",
                        a.times.front().bytes, a.times.back().bytes,
                        a.times.front().seconds * 1e6, a.times.back().seconds * 1e6);
  }

  os << "\n";
  const char *row = "{0,-24} {1,7} {2,10} {3,10} {4,12} {5,10} {6,10} {7,10} {8,10} {9,10}\n";
  os << llvm::formatv(row, "device", "layers", "weights", "KV cache", "activations",
                      "workspace", "reserve", "total", "capacity", "free");
  for (const DeviceMemory &m : best.memory) {
    std::string name = llvm::formatv("#{0} {1}", m.device, t.devices[size_t(m.device)].name);
    int64_t free = int64_t(m.capacity) - int64_t(m.total());
    os << llvm::formatv(row, name, layerRange(best, m.device), gbText(m.weights),
                        gbText(m.kvCache), gbText(m.activations), gbText(m.workspace),
                        gbText(m.reserve), gbText(m.total()), gbText(m.capacity),
                        free >= 0 ? gbText(uint64_t(free)) : "-" + gbText(uint64_t(-free)));
    if (m.hostWeights)
      os << llvm::formatv("{0,-24} host RAM holds {1} of offloaded weights\n", "",
                          gbText(m.hostWeights));
  }

  os << "\n";
  const int64_t perStep = stepBatch(best, o);
  const std::string stepLabel = stepBatchLabel(best, o);
  const char *srow = "{0,-6} {1,-24} {2,8} {3,14} {4,14} {5,14} {6,14}\n";
  os << llvm::formatv(srow, "stage", "devices", "layers", "ms/step b=1",
                      "ms/step " + stepLabel, "link ms b=1", "link ms " + stepLabel);
  for (size_t i = 0; i < best.stages.size(); ++i) {
    const Stage &s = best.stages[i];
    std::string devs;
    for (int d : s.devices)
      devs += (devs.empty() ? "" : "+") + t.devices[size_t(d)].name + "#" + std::to_string(d);
    os << llvm::formatv(srow, i, devs, s.endLayer - s.firstLayer,
                        llvm::formatv("{0:f3}", s.seconds1 * 1e3).str(),
                        llvm::formatv("{0:f3}", s.secondsBatch * 1e3).str(),
                        llvm::formatv("{0:f4}", s.linkSeconds1 * 1e3).str(),
                        llvm::formatv("{0:f4}", s.linkSecondsBatch * 1e3).str());
  }
  if (best.microBatches > 1)
    os << llvm::formatv("schedule     {0} micro-batches in flight through the pipeline "
                        "(mb={1}: the sequences of one micro-batch)\n",
                        best.microBatches, perStep);

  if (!r.runnersUp.empty()) {
    os << "\nrunners-up\n";
    for (size_t i = 0; i < r.runnersUp.size(); ++i)
      os << llvm::formatv("  {0}. {1}\n     {2}\n", i + 1, r.runnersUp[i].description,
                          throughputText(r.runnersUp[i], o));
  }
  os << llvm::formatv("\ncandidates   {0} evaluated\n", r.candidatesEvaluated);
}

void writePartitionSvg(const PartitionResult &r, const hardware::Topology &t,
                       const PartitionOptions &o, const ModelConfig &config,
                       llvm::raw_ostream &os) {
  const Candidate &best = r.best;
  // Memory categories and stages never share a color: stages take hues the
  // categories do not use.
  const char *categories[] = {"weights", "KV cache", "activations", "workspace", "reserve"};
  const char *catColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#bab0ac", "#9c755f"};
  const char *stageColors[] = {"#7b4fa0", "#2a9d8f", "#c9a227", "#d1495b",
                               "#5c6f7b", "#8ab17d", "#e76f51", "#3d5a80"};
  const int width = 960, barH = 24, left = 190, labelRoom = 230;
  const double barW = double(width - left - labelRoom);
  const int64_t perStep = stepBatch(best, o);
  const std::string stepLabel = stepBatchLabel(best, o);
  size_t nDev = best.memory.size();
  std::vector<const Candidate *> compared = {&best};
  if (r.memoryProportional && r.memoryProportional->fits)
    compared.push_back(&*r.memoryProportional);
  if (!r.runnersUp.empty())
    compared.push_back(&r.runnersUp.front());

  int memTop = 100;
  int mapTop = memTop + int(nDev) * (barH + 14) + 60;
  int stageTop = mapTop + barH + 24 + int(best.stages.size()) * 16 + 40;
  int cmpTop = stageTop + int(best.stages.size()) * (2 * barH + 16) + 50;
  int height = cmpTop + int(compared.size()) * (barH + 10) + 30;

  auto text = [&](double x, double y, const std::string &s, const char *extra = "") {
    os << llvm::formatv("<text x=\"{0:f1}\" y=\"{1:f1}\"{2}>{3}</text>\n", x, y, extra, s);
  };
  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
                      "height=\"{1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
                      width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  text(10, 24,
       llvm::formatv("{0} on {1} ({2}, batch {3}, context {4})", config.name, t.name,
                     weightsText(o), o.batch, o.context),
       " font-size=\"16\" font-weight=\"bold\"");
  text(10, 44, "chosen: " + best.description);
  text(10, 62, llvm::formatv("{0:f1} tok/s at batch 1, {1:f1} tok/s in total at batch {2} "
                             "(objective: {3})",
                             best.tokensPerSecondBatch1, best.tokensPerSecond, o.batch,
                             o.objective == Objective::Latency ? "latency" : "throughput"));

  // Memory per device, stacked by category, against capacity.
  uint64_t maxBytes = 1;
  for (const DeviceMemory &m : best.memory)
    maxBytes = std::max({maxBytes, m.capacity, m.total()});
  double scale = barW / double(maxBytes);
  text(10, memTop - 10, "Memory per device (GiB)", " font-weight=\"bold\"");
  for (size_t i = 0; i < nDev; ++i) {
    const DeviceMemory &m = best.memory[i];
    int y = memTop + int(i) * (barH + 14);
    text(10, y + 16, llvm::formatv("#{0} {1}", m.device, t.devices[size_t(m.device)].name));
    bool used = false;
    for (const Stage &st : best.stages)
      used |= llvm::is_contained(st.devices, m.device);
    uint64_t parts[] = {m.weights, m.kvCache, m.activations, m.workspace, m.reserve};
    double x = left;
    for (int c = 0; c < 5; ++c) {
      double w = double(parts[c]) * scale;
      os << llvm::formatv("<rect x=\"{0:f1}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" "
                          "fill=\"{4}\"><title>{5}: {6}</title></rect>\n",
                          x, y, w, barH, catColors[c], categories[c], gbText(parts[c]));
      x += w;
    }
    double cap = left + double(m.capacity) * scale;
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" "
                        "fill=\"none\" stroke=\"black\"/>\n",
                        left, y, cap - left, barH);
    text(left + barW + 10, y + 16,
         used ? gbText(m.total()) + " of " + gbText(m.capacity)
              : "idle: faster without it",
         " font-size=\"11\"");
  }
  int legendY = memTop + int(nDev) * (barH + 14) + 4;
  for (int c = 0; c < 5; ++c) {
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"10\" height=\"10\" fill=\"{2}\"/>\n",
                        left + c * 110, legendY, catColors[c]);
    text(left + c * 110 + 14, legendY + 9, categories[c]);
  }
  text(left + 5 * 110 + 14, legendY + 9, "(outline: capacity)", " font-size=\"11\"");

  // Layer map: one cell per layer, colored by stage; one label line per
  // stage, so narrow stages do not overlap.
  text(10, mapTop - 10, "Layer map", " font-weight=\"bold\"");
  double cell = barW / double(config.numLayers);
  for (size_t s = 0; s < best.stages.size(); ++s) {
    const Stage &st = best.stages[s];
    for (int64_t l = st.firstLayer; l < st.endLayer; ++l) {
      bool host = l >= st.endLayer - st.offloadedLayers;
      os << llvm::formatv("<rect x=\"{0:f2}\" y=\"{1}\" width=\"{2:f2}\" height=\"{3}\" "
                          "fill=\"{4}\" stroke=\"white\" stroke-width=\"0.5\"{5}>"
                          "<title>layer {6}: stage {7}</title></rect>\n",
                          left + double(l) * cell, mapTop, cell, barH, stageColors[s % 8],
                          host ? " fill-opacity=\"0.4\"" : "", l, s);
    }
    std::string devs;
    for (int d : st.devices)
      devs += (devs.empty() ? "" : "+") + t.devices[size_t(d)].name + "#" + std::to_string(d);
    int y = mapTop + barH + 16 + int(s) * 16;
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"10\" height=\"10\" fill=\"{2}\"/>\n",
                        left, y - 9, stageColors[s % 8]);
    text(left + 14, y,
         llvm::formatv("stage {0}: {1}, layers {2}-{3}{4}", s, devs, st.firstLayer,
                       st.endLayer - 1, st.offloadedLayers ? " (pale: in host RAM)" : ""));
  }
  text(10, mapTop + 16, llvm::formatv("layers 0-{0}", config.numLayers - 1));

  // Time per stage at batch 1 and at the plan's step size, with link time.
  text(10, stageTop - 10,
       perStep > 1 ? "Time per decode step and stage (ms), at batch 1 and at " + stepLabel +
                         (best.microBatches > 1 ? " (one micro-batch)" : "")
                   : std::string("Time per decode step and stage (ms), batch 1"),
       " font-weight=\"bold\"");
  double maxT = 1e-9;
  for (const Stage &s : best.stages)
    maxT = std::max({maxT, s.seconds1 + s.linkSeconds1, s.secondsBatch + s.linkSecondsBatch});
  double tScale = barW / maxT;
  for (size_t s = 0; s < best.stages.size(); ++s) {
    const Stage &st = best.stages[s];
    int y = stageTop + int(s) * (2 * barH + 16);
    text(10, y + 16, llvm::formatv("stage {0}, b=1", s));
    if (perStep > 1)
      text(10, y + barH + 16, llvm::formatv("stage {0}, {1}", s, stepLabel));
    struct Row {
      double compute, link;
      int y;
      const char *opacity;
    } rows[] = {{st.seconds1, st.linkSeconds1, y, " fill-opacity=\"0.55\""},
                {st.secondsBatch, st.linkSecondsBatch, y + barH, ""}};
    for (const Row &row : llvm::ArrayRef<Row>(rows).take_front(perStep > 1 ? 2 : 1)) {
      os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" "
                          "fill=\"{4}\"{5}/>\n",
                          left, row.y, row.compute * tScale, barH - 2, stageColors[s % 8],
                          row.opacity);
      os << llvm::formatv("<rect x=\"{0:f1}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" "
                          "fill=\"#333\"><title>link</title></rect>\n",
                          left + row.compute * tScale, row.y, row.link * tScale, barH - 2);
      text(left + barW + 10, row.y + 16,
           llvm::formatv("{0:f2} ms + link {1:f3} ms", row.compute * 1e3, row.link * 1e3),
           " font-size=\"11\"");
    }
  }

  // The chosen plan against the split by memory and the best runner-up.
  text(10, cmpTop - 10, llvm::formatv("Tokens/s in total at batch {0}", o.batch),
       " font-weight=\"bold\"");
  double maxTps = 1e-9;
  for (const Candidate *c : compared)
    maxTps = std::max(maxTps, c->tokensPerSecond);
  for (size_t i = 0; i < compared.size(); ++i) {
    const Candidate &c = *compared[i];
    int y = cmpTop + int(i) * (barH + 10);
    const char *label = i == 0 ? "chosen"
                        : (r.memoryProportional && &c == &*r.memoryProportional)
                            ? "split by memory"
                            : "best runner-up";
    text(10, y + 16, label);
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" "
                        "fill=\"{4}\"><title>{5}</title></rect>\n",
                        left, y, c.tokensPerSecond / maxTps * barW, barH,
                        i == 0 ? "#3d5a80" : "#9aa5b1", c.description);
    text(left + barW + 10, y + 16,
         llvm::formatv("{0:f1} tok/s{1}", c.tokensPerSecond,
                       i == 0 ? std::string()
                              : llvm::formatv(" (chosen: {0:f2}x)",
                                              best.tokensPerSecond / std::max(1e-9, c.tokensPerSecond))
                                    .str()),
         " font-size=\"11\"");
  }
  os << "</svg>\n";
}

} // namespace weft::partition
