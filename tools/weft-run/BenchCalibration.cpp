// Predicted against measured step times, and calibration write-back.
#include "tools/weft-run/BenchCalibration.h"

#include "runtime/base/Text.h"
#include "runtime/io/ReadFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

namespace weft::benchcal {

std::optional<Predicted> predictionFor(const plan::fb::Bucket &bucket, int64_t context) {
  const auto *list = bucket.predictions();
  if (!list || list->size() == 0)
    return std::nullopt;
  auto at = [&](uint32_t i) {
    const plan::fb::StepPrediction *p = list->Get(i);
    return Predicted{p->seconds(), p->raw_other_seconds(), p->raw_attention_seconds()};
  };
  if (bucket.prefill() || list->size() == 1 || context <= list->Get(0)->context())
    return at(0);
  for (uint32_t i = 1; i < list->size(); ++i) {
    int64_t c0 = list->Get(i - 1)->context(), c1 = list->Get(i)->context();
    if (context <= c1) {
      double f = double(context - c0) / double(c1 - c0);
      Predicted a = at(i - 1), b = at(i);
      return Predicted{a.seconds + f * (b.seconds - a.seconds),
                       a.rawOther + f * (b.rawOther - a.rawOther),
                       a.rawAttention + f * (b.rawAttention - a.rawAttention)};
    }
  }
  return at(list->size() - 1);
}

std::vector<Scale> fitScales(const std::vector<Measurement> &measurements, bool prefill) {
  std::map<int64_t, std::vector<const Measurement *>> byTokens;
  for (const Measurement &m : measurements)
    if (m.prefill == prefill && m.seconds > 0 && m.predicted.rawOther + m.predicted.rawAttention > 0)
      byTokens[m.tokens].push_back(&m);
  std::vector<Scale> out;
  auto clamp = [](double v) { return std::min(5.0, std::max(0.2, v)); };
  for (const auto &[tokens, list] : byTokens) {
    Scale s;
    s.tokens = tokens;
    // Relative least squares: sum over i of (w o_i + a a_i - m_i)^2 / m_i^2.
    double oo = 0, oa = 0, aa = 0, om = 0, am = 0, ratio = 0;
    std::vector<int64_t> contexts;
    for (const Measurement *m : list) {
      double o = m->predicted.rawOther / m->seconds, a = m->predicted.rawAttention / m->seconds;
      oo += o * o;
      oa += o * a;
      aa += a * a;
      om += o;
      am += a;
      ratio += m->seconds / (m->predicted.rawOther + m->predicted.rawAttention);
      contexts.push_back(m->context);
    }
    std::sort(contexts.begin(), contexts.end());
    bool twoContexts = std::unique(contexts.begin(), contexts.end()) - contexts.begin() >= 2;
    double det = oo * aa - oa * oa;
    if (twoContexts && det > 1e-9 * oo * aa) {
      s.weights = clamp((om * aa - am * oa) / det);
      s.attention = clamp((am * oo - om * oa) / det);
    } else {
      s.weights = s.attention = clamp(ratio / double(list.size()));
    }
    out.push_back(s);
  }
  return out;
}

namespace {

nlohmann::ordered_json scalesJson(const std::vector<Scale> &scales) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Scale &s : scales)
    list.push_back({{"tokens", s.tokens},
                    {"weights_scale", std::round(s.weights * 1e4) / 1e4},
                    {"attention_scale", std::round(s.attention * 1e4) / 1e4}});
  return list;
}

} // namespace

Status writeCalibration(const std::string &path, int planDevices, const std::string &gpuName,
                        const std::string &driver, const std::vector<Scale> &decode,
                        const std::vector<Scale> &prefill) {
  StatusOr<std::string> text = io::readRegularFile(path, 16u << 20, "the topology file");
  if (!text.isOk())
    return text.status();
  WEFT_RETURN_IF_ERROR(io::checkJsonNesting(*text, io::kMaxJsonDepth, path));
  nlohmann::ordered_json topology = nlohmann::ordered_json::parse(*text, nullptr, false);
  if (topology.is_discarded() || !topology.is_object() || !topology.contains("devices") ||
      !topology["devices"].is_array())
    return invalidArgument(path + ": not a topology file (expected an object with \"devices\")");
  nlohmann::ordered_json &devices = topology["devices"];
  if (int(devices.size()) != planDevices)
    return invalidArgument(path + ": describes " + std::to_string(devices.size()) +
                           " devices, the plan " + std::to_string(planDevices) +
                           ": write the calibration into the topology the plan was compiled for");
  if (decode.empty() && prefill.empty())
    return failedPrecondition("--write-calibration: no bucket measured against a prediction "
                              "(the plan holds none: compile it again)");
  for (size_t i = 0; i < devices.size(); ++i) {
    nlohmann::ordered_json &d = devices[i];
    if (!d.is_object())
      return invalidArgument(path + ": devices[" + std::to_string(i) + "] is not an object");
    if (!d.contains("calibration") || !d["calibration"].is_object())
      d["calibration"] = {
          {"gpu", gpuName}, {"driver", driver}, {"date", weft::todayUtc()}};
    nlohmann::ordered_json &c = d["calibration"];
    if (!decode.empty())
      c["steps"] = scalesJson(decode);
    if (!prefill.empty())
      c["prefill_steps"] = scalesJson(prefill);
  }
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << topology.dump(2) << "\n";
    if (!out)
      return internalError(tmp + ": cannot write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return internalError(path + ": cannot replace it with " + tmp);
  return Status::ok();
}

} // namespace weft::benchcal
