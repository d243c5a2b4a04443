// Where --crash-report finds libddp_crash_report.so (tools/dev/crash_report.cpp).
#pragma once

#include <string>

namespace ddprun {

/// The library beside this ddprun in a build tree, or where `cmake --install` puts it relative
/// to the installed ddprun. Exits 2, naming both places, when neither has it, or when its path
/// cannot go into LD_PRELOAD (which splits at spaces and colons: the ranks would start without
/// it, and nothing would say so).
std::string find_crash_report_library();

} // namespace ddprun
