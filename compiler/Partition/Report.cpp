// Text and SVG renderings of a partition.
#include "compiler/Partition/Report.h"

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

} // namespace

void printPartitionReport(const PartitionResult &r, const target::Topology &t,
                          const PartitionOptions &o, const ModelConfig &config,
                          llvm::raw_ostream &os) {
  const Candidate &best = r.best;
  os << llvm::formatv("partition    {0} on {1}: objective {2}, batch {3}, "
                      "context {4}, {5} weights\n",
                      config.name, t.name,
                      o.objective == Objective::Latency ? "latency" : "throughput",
                      o.batch, o.context, weightDTypeName(o.weights.dtype));
  os << "chosen       " << best.description << "\n";
  os << "             " << throughputText(best, o) << "\n";
  if (r.memoryProportional) {
    const Candidate &m = *r.memoryProportional;
    os << "memory split " << m.description << (m.fits ? "" : " (does not fit)") << "\n";
    os << "             " << throughputText(m, o) << "\n";
    if (m.fits && m.score(o.objective) > 0)
      os << llvm::formatv("             chosen / memory split: {0:f3}x\n",
                          best.score(o.objective) / m.score(o.objective));
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
  // Each stage runs micro-batches of batch / microBatches sequences.
  const int64_t perStep = best.microBatches > 1
                              ? (o.batch + best.microBatches - 1) / best.microBatches
                              : o.batch;
  const std::string stepLabel = (best.microBatches > 1 ? "mb=" : "b=") + std::to_string(perStep);
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

void writePartitionSvg(const PartitionResult &r, const target::Topology &t,
                       const PartitionOptions &o, const ModelConfig &config,
                       llvm::raw_ostream &os) {
  const Candidate &best = r.best;
  const char *palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                           "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"};
  const char *categories[] = {"weights", "KV cache", "activations", "workspace", "reserve"};
  const char *catColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#bab0ac", "#9c755f"};
  const int width = 900, barH = 28, left = 190;
  size_t nDev = best.memory.size();
  int memTop = 90, mapTop = memTop + int(nDev) * (barH + 12) + 60;
  int stageTop = mapTop + 90;
  int height = stageTop + int(best.stages.size()) * (barH + 12) + 50;
  uint64_t maxBytes = 1;
  for (const DeviceMemory &m : best.memory)
    maxBytes = std::max({maxBytes, m.capacity, m.total()});
  double scale = double(width - left - 40) / double(maxBytes);

  os << llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
                      "height=\"{1}\" font-family=\"sans-serif\" font-size=\"12\">\n",
                      width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::formatv("<text x=\"10\" y=\"24\" font-size=\"16\" font-weight=\"bold\">"
                      "{0} on {1} ({2} weights, batch {3}, context {4})</text>\n",
                      config.name, t.name, weightDTypeName(o.weights.dtype), o.batch,
                      o.context);
  os << llvm::formatv("<text x=\"10\" y=\"44\">{0}: {1:f1} tok/s at batch 1, "
                      "{2:f1} tok/s at batch {3}</text>\n",
                      best.description, best.tokensPerSecondBatch1,
                      best.tokensPerSecond, o.batch);

  // Memory per device, stacked by category, against capacity.
  os << llvm::formatv("<text x=\"10\" y=\"{0}\" font-weight=\"bold\">Memory per device</text>\n",
                      memTop - 8);
  for (size_t i = 0; i < nDev; ++i) {
    const DeviceMemory &m = best.memory[i];
    int y = memTop + int(i) * (barH + 12);
    os << llvm::formatv("<text x=\"10\" y=\"{0}\">#{1} {2}</text>\n", y + 18, i,
                        t.devices[i].name);
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
    os << llvm::formatv("<line x1=\"{0:f1}\" x2=\"{0:f1}\" y1=\"{1}\" y2=\"{2}\" "
                        "stroke=\"black\" stroke-width=\"2\"/>\n",
                        cap, y - 3, y + barH + 3);
    os << llvm::formatv("<text x=\"{0:f1}\" y=\"{1}\" font-size=\"10\">{2} / {3}</text>\n",
                        std::min(cap + 4, double(width - 140)), y + barH + 10,
                        gbText(m.total()), gbText(m.capacity));
  }
  int legendY = memTop + int(nDev) * (barH + 12) + 8;
  for (int c = 0; c < 5; ++c) {
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"10\" height=\"10\" fill=\"{2}\"/>"
                        "<text x=\"{3}\" y=\"{4}\">{5}</text>\n",
                        left + c * 110, legendY, catColors[c], left + c * 110 + 14,
                        legendY + 9, categories[c]);
  }

  // Layer map: one cell per layer, colored by stage.
  os << llvm::formatv("<text x=\"10\" y=\"{0}\" font-weight=\"bold\">Layer map</text>\n",
                      mapTop - 8);
  double cell = double(width - left - 40) / double(config.numLayers);
  for (size_t s = 0; s < best.stages.size(); ++s) {
    const Stage &st = best.stages[s];
    for (int64_t l = st.firstLayer; l < st.endLayer; ++l) {
      bool host = l >= st.endLayer - st.offloadedLayers;
      os << llvm::formatv("<rect x=\"{0:f2}\" y=\"{1}\" width=\"{2:f2}\" height=\"{3}\" "
                          "fill=\"{4}\" stroke=\"white\" stroke-width=\"0.5\"{5}>"
                          "<title>layer {6}: stage {7}</title></rect>\n",
                          left + double(l) * cell, mapTop, cell, barH,
                          palette[s % 8], host ? " fill-opacity=\"0.4\"" : "", l, s);
    }
    std::string devs;
    for (int d : st.devices)
      devs += (devs.empty() ? "" : "+") + t.devices[size_t(d)].name;
    os << llvm::formatv("<text x=\"{0:f1}\" y=\"{1}\">stage {2}: {3} ({4}-{5}{6})</text>\n",
                        left + double(st.firstLayer) * cell, mapTop + barH + 16, s, devs,
                        st.firstLayer, st.endLayer - 1,
                        st.offloadedLayers ? ", pale: on host" : "");
  }
  os << llvm::formatv("<text x=\"10\" y=\"{0}\">layers 0-{1}</text>\n", mapTop + 18,
                      config.numLayers - 1);

  // Time per stage at batch 1 (with link time).
  os << llvm::formatv("<text x=\"10\" y=\"{0}\" font-weight=\"bold\">Time per decode "
                      "step, batch 1 (ms)</text>\n",
                      stageTop - 8);
  double maxT = 1e-9;
  for (const Stage &s : best.stages)
    maxT = std::max(maxT, s.seconds1 + s.linkSeconds1);
  double tScale = double(width - left - 230) / maxT;
  for (size_t s = 0; s < best.stages.size(); ++s) {
    const Stage &st = best.stages[s];
    int y = stageTop + int(s) * (barH + 12);
    os << llvm::formatv("<text x=\"10\" y=\"{0}\">stage {1}</text>\n", y + 18, s);
    os << llvm::formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" "
                        "fill=\"{4}\"/>\n",
                        left, y, st.seconds1 * tScale, barH, palette[s % 8]);
    os << llvm::formatv("<rect x=\"{0:f1}\" y=\"{1}\" width=\"{2:f1}\" height=\"{3}\" "
                        "fill=\"#555\"><title>link</title></rect>\n",
                        left + st.seconds1 * tScale, y, st.linkSeconds1 * tScale, barH);
    os << llvm::formatv("<text x=\"{0:f1}\" y=\"{1}\">{2:f2} ms + link {3:f3} ms</text>\n",
                        left + (st.seconds1 + st.linkSeconds1) * tScale + 6, y + 18,
                        st.seconds1 * 1e3, st.linkSeconds1 * 1e3);
  }
  os << "</svg>\n";
}

} // namespace weft::partition
