// Generates the exact real -> pseudo opcode tables of the LLVM AMDGPU
// backend this build uses, one per encoding generation, by inverting
// llvm::AMDGPU::getMCOpcode (the InstrMapping the backend encodes pseudos
// with). That function lives only in the static AMDGPU archives, which
// cannot share a process with libLLVM.so, so this is a separate program:
// driver/build.rs builds and runs it, and the driver includes its output.
//
// Usage: generate OUTPUT_DIR   (writes OUTPUT_DIR/opcodes-<generation>.tsv)
//
// The encoding family numbers (SIEncodingFamily, a private header of the
// backend) are written down per LLVM major below, and checked here against
// the backend itself: every real opcode a family maps to must carry that
// family's name suffix, or the build stops.
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCInstrInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

extern "C" void LLVMInitializeAMDGPUTargetInfo();
extern "C" void LLVMInitializeAMDGPUTargetMC();

namespace llvm {
namespace AMDGPU {
int getMCOpcode(uint16_t Opcode, unsigned Gen);
} // namespace AMDGPU
} // namespace llvm

namespace {

// SIEncodingFamily: identical numbers 0-10 in LLVM 15, 17 and 21; LLVM 21
// adds GFX12 (11) and GFX1250 (12).
struct Family {
  const char *Name;
  unsigned Number;
  // What the names of the real opcodes of this family end with (any of).
  std::vector<std::string> Suffixes;
};

const Family VI{"VI", 1, {"_vi"}};
const Family SDWA9{"SDWA9", 3, {"_sdwa_gfx9", "_gfx9"}};
const Family GFX9{"GFX9", 5, {"_gfx9"}};
const Family GFX10{"GFX10", 6, {"_gfx10", "_gfx10_gfx11", "_gfx10_gfx11_gfx12"}};
const Family SDWA10{"SDWA10", 7, {"_sdwa_gfx10", "_gfx10"}};
const Family GFX90A{"GFX90A", 8, {"_gfx90a", "_gfx90a_acd", "_gfx90a_vcd"}};
const Family GFX940{"GFX940", 9, {"_gfx940", "_gfx940_acd", "_gfx940_vcd"}};
const Family GFX11{"GFX11", 10, {"_gfx11", "_gfx11_gfx12"}};
#if LLVM_VERSION_MAJOR >= 21
const Family GFX12{"GFX12", 11, {"_gfx12"}};
#endif

// The encoding generations the driver lifts, and the families
// SIInstrInfo::pseudoToMCOpcode consults for them, most specific first.
struct Generation {
  const char *Name;
  std::vector<Family> Families;
};

std::vector<Generation> generations() {
  std::vector<Generation> All = {
      // gfx900-gfx90c, gfx908, gfx9-generic: VI, renamed-in-GFX9 and SDWA9 opcodes.
      {"gfx9", {VI, GFX9, SDWA9}},
      {"gfx90a", {GFX90A, VI, GFX9, SDWA9}},
      // gfx940-gfx942, gfx950, gfx9-4-generic (gfx950 has no family of its own).
      {"gfx940", {GFX940, GFX90A, VI, GFX9, SDWA9}},
      {"gfx10", {GFX10, SDWA10}},
      {"gfx11", {GFX11}},
  };
#if LLVM_VERSION_MAJOR >= 21
  All.push_back({"gfx12", {GFX12}});
#endif
  return All;
}

// Generations this LLVM has no encodings of: their tables are empty.
std::vector<const char *> absentGenerations() {
#if LLVM_VERSION_MAJOR >= 21
  return {};
#else
  return {"gfx12"};
#endif
}

bool endsWith(const std::string &Text, const std::string &Suffix) {
  return Text.size() >= Suffix.size() && Text.compare(Text.size() - Suffix.size(), Suffix.size(), Suffix) == 0;
}

// Whether a family's real opcodes carry its suffixes (most of them: a few
// reals are shared between generations and keep an older name).
bool familyMatches(const llvm::MCInstrInfo &MII, const Family &F) {
  unsigned Reals = 0, Matching = 0;
  for (unsigned Pseudo = 0; Pseudo < MII.getNumOpcodes(); ++Pseudo) {
    int Real = llvm::AMDGPU::getMCOpcode(Pseudo, F.Number);
    if (Real == -1 || Real == 0xffff)
      continue;
    ++Reals;
    std::string Name = MII.getName(Real).str();
    if (std::any_of(F.Suffixes.begin(), F.Suffixes.end(), [&](const std::string &S) { return endsWith(Name, S); }))
      ++Matching;
  }
  return Reals > 0 && Matching * 10 >= Reals * 9;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: generate OUTPUT_DIR\n";
    return 2;
  }
  std::string Out = argv[1];
  LLVMInitializeAMDGPUTargetInfo();
  LLVMInitializeAMDGPUTargetMC();
  std::string Error;
  const llvm::Target *T = llvm::TargetRegistry::lookupTarget("amdgcn-amd-amdhsa", Error);
  if (!T) {
    llvm::errs() << Error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MCInstrInfo> MII(T->createMCInstrInfo());

  for (const Generation &G : generations()) {
    for (const Family &F : G.Families)
      if (!familyMatches(*MII, F)) {
        llvm::errs() << "SIEncodingFamily " << F.Name << " is not " << F.Number << " in LLVM " << LLVM_VERSION_STRING
                     << ": its real opcodes do not end in " << F.Suffixes.front()
                     << "; update driver/cpp/opcode-table/generate.cpp for this LLVM\n";
        return 1;
      }

    // real -> (pseudo, family rank), in family order.
    std::map<unsigned, std::vector<std::pair<unsigned, unsigned>>> Pseudos;
    for (unsigned Pseudo = 0; Pseudo < MII->getNumOpcodes(); ++Pseudo)
      for (unsigned Rank = 0; Rank < G.Families.size(); ++Rank) {
        int Real = llvm::AMDGPU::getMCOpcode(Pseudo, G.Families[Rank].Number);
        if (Real == -1 || Real == 0xffff)
          continue;
        Pseudos[Real].push_back({Pseudo, Rank});
      }

    // One pseudo per real: the first family in the order above; then the
    // GFX9 variant of a pseudo (DS_*_gfx9: LDS access without the M0
    // operand, which is what GFX9 hardware does); then the shortest name
    // (the plain pseudo over its _exact/_mode twins, which differ only for
    // codegen).
    auto Key = [&](const std::pair<unsigned, unsigned> &C) {
      std::string Name = MII->getName(C.first).str();
      return std::make_tuple(C.second, !endsWith(Name, "_gfx9"), Name.size(), Name);
    };
    std::ofstream File(Out + "/opcodes-" + G.Name + ".tsv");
    File << "# real\tpseudo\tencoding family\tother pseudos with this encoding\n"
         << "# LLVM " << LLVM_VERSION_STRING << " AMDGPU, " << G.Name
         << "; generated by driver/cpp/opcode-table/generate.cpp\n";
    for (auto &[Real, Candidates] : Pseudos) {
      auto Best = *std::min_element(Candidates.begin(), Candidates.end(),
                                    [&](auto &A, auto &B) { return Key(A) < Key(B); });
      std::string Others;
      for (auto &Candidate : Candidates) {
        std::string Name = MII->getName(Candidate.first).str();
        if (Candidate.first != Best.first && Others.find(Name) == std::string::npos)
          Others += (Others.empty() ? "" : ",") + Name;
      }
      File << MII->getName(Real).str() << "\t" << MII->getName(Best.first).str() << "\t"
           << G.Families[Best.second].Number << "\t" << (Others.empty() ? "-" : Others) << "\n";
    }
    if (!File) {
      llvm::errs() << "cannot write " << Out << "/opcodes-" << G.Name << ".tsv\n";
      return 1;
    }
  }
  for (const char *Name : absentGenerations()) {
    std::ofstream File(Out + "/opcodes-" + Name + ".tsv");
    File << "# LLVM " << LLVM_VERSION_STRING << " has no " << Name << " encodings\n";
  }
  return 0;
}
