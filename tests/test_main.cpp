// doctest's main, which also fails a run whose --test-case filter matches no case. CTest runs each
// case by its name (doctest_discover_tests); a name CTest splits or mangles (a ';' in it, say)
// would otherwise match nothing and pass without running a check.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>
#include <iostream>
#include <set>
#include <string>

namespace {

unsigned cases_run = 0;
std::set<std::string> skipped_by_decorator;  // doctest::skip() cases, which a filter may name

struct CountCases : doctest::IReporter {
  explicit CountCases(const doctest::ContextOptions&) {}
  void test_case_start(const doctest::TestCaseData&) override { ++cases_run; }
  void test_case_skipped(const doctest::TestCaseData& tc) override {
    if (tc.m_skip) skipped_by_decorator.insert(tc.m_name);
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
};

DOCTEST_REGISTER_LISTENER("count-cases", 1, CountCases);

// The value of --test-case= or -tc=, its escaped commas unescaped; empty when there is none.
std::string test_case_filter(int argc, char** argv) {
  std::string filter;
  for (int i = 1; i < argc; ++i)
    for (const char* prefix : {"--test-case=", "-tc="})
      if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) filter = argv[i] + std::strlen(prefix);
  std::string plain;
  for (size_t i = 0; i < filter.size(); ++i)
    if (!(filter[i] == '\\' && i + 1 < filter.size() && filter[i + 1] == ',')) plain += filter[i];
  return plain;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit()) return status;
  const std::string filter = test_case_filter(argc, argv);
  if (!filter.empty() && cases_run == 0 && !skipped_by_decorator.count(filter)) {
    std::cerr << "no test case matches --test-case=" << filter << "\n";
    return 1;
  }
  return status;
}
