#include "core/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace tessera {

namespace {

const char kMagic[] = "\x93NUMPY";

std::string npy_descr(DType t) {
  switch (t) {
    case DType::kF32:
      return "<f4";
    case DType::kF16:
      return "<f2";
    case DType::kI8:
      return "|i1";
    case DType::kU8:
      return "|u1";
    case DType::kI32:
      return "<i4";
    case DType::kI64:
      return "<i8";
    case DType::kBool:
      return "|b1";
  }
  return "";
}

Result<DType> dtype_from_descr(const std::string& d) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DType t = static_cast<DType>(i);
    const std::string want = npy_descr(t);
    // Single-byte types may be written with '|', '<' or '='.
    if (d == want || (want[0] == '|' && d.size() == 3 && (d[0] == '<' || d[0] == '=') &&
                      d.substr(1) == want.substr(1))) {
      return t;
    }
  }
  return unimplemented("unsupported .npy dtype '" + d +
                       "' (supported: little-endian f4, f2, i1, u1, i4, i8, b1)");
}

// The header is a Python dict literal, as numpy writes it: {'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), } followed by spaces and '\n'. It is parsed strictly: braces, exactly the
// three keys once each, a string, a boolean and a tuple of integers; anything else is refused.
struct NpyHeader {
  std::string descr;
  std::string fortran;
  std::string shape;  // the tuple's text, parentheses included
};

Result<NpyHeader> parse_header(const std::string& header) {
  auto bad = [&](const std::string& what) {
    return invalid_argument(".npy header: " + what + " in " + quote_name(header));
  };
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < header.size() && header[i] == ' ') ++i;
  };
  skip_spaces();
  if (i >= header.size() || header[i] != '{') return bad("expected '{'");
  ++i;
  NpyHeader h;
  bool seen[3] = {false, false, false};
  for (;;) {
    skip_spaces();
    if (i < header.size() && header[i] == '}') {
      ++i;
      break;
    }
    if (i >= header.size() || header[i] != '\'') return bad("expected a key or '}'");
    const size_t key_end = header.find('\'', i + 1);
    if (key_end == std::string::npos) return bad("unterminated key");
    const std::string key = header.substr(i + 1, key_end - i - 1);
    i = key_end + 1;
    skip_spaces();
    if (i >= header.size() || header[i] != ':') return bad("expected ':' after " + quote_name(key));
    ++i;
    skip_spaces();
    int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
    if (k < 0) return bad("unknown key " + quote_name(key));
    if (seen[k]) return bad("key " + quote_name(key) + " given twice");
    seen[k] = true;
    if (i >= header.size()) return bad("no value for " + quote_name(key));
    if (k == 0) {
      if (header[i] != '\'') return bad("'descr' is not a string");
      const size_t end = header.find('\'', i + 1);
      if (end == std::string::npos) return bad("unterminated string");
      h.descr = header.substr(i + 1, end - i - 1);
      i = end + 1;
    } else if (k == 1) {
      for (const char* b : {"False", "True"}) {
        if (header.compare(i, std::strlen(b), b) == 0) {
          h.fortran = b;
          i += std::strlen(b);
          break;
        }
      }
      if (h.fortran.empty()) return bad("'fortran_order' is not False or True");
    } else {
      if (header[i] != '(') return bad("shape is not a tuple");
      const size_t end = header.find(')', i);
      if (end == std::string::npos) return bad("unterminated shape");
      h.shape = header.substr(i, end - i + 1);
      i = end + 1;
    }
    skip_spaces();
    if (i < header.size() && header[i] == ',') {
      ++i;
    } else if (i >= header.size() || header[i] != '}') {
      return bad("expected ',' or '}' after the value of " + quote_name(key));
    }
  }
  while (i < header.size() && (header[i] == ' ' || header[i] == '\n')) ++i;
  if (i != header.size()) return bad("unexpected text after '}'");
  if (!seen[0]) return invalid_argument(".npy header lacks 'descr'");
  if (!seen[1]) return invalid_argument(".npy header lacks 'fortran_order'");
  if (!seen[2]) return invalid_argument(".npy header lacks 'shape'");
  return h;
}

Result<Shape> parse_shape_tuple(const std::string& s) {
  // "()", "(3,)", "(2, 3)" and "(2, 3,)"; the text starts with '(' and ends with ')'.
  std::vector<int64_t> dims;
  auto bad = [&] { return invalid_argument(".npy header: bad shape " + quote_name(s)); };
  size_t i = 1;
  auto skip_spaces = [&] {
    while (i < s.size() && s[i] == ' ') ++i;
  };
  skip_spaces();
  while (s[i] != ')') {
    if (s[i] < '0' || s[i] > '9') return bad();
    int64_t d = 0;
    while (s[i] >= '0' && s[i] <= '9') {
      if (d > kMaxDim) return out_of_range(".npy header: dimension too large in " + quote_name(s));
      d = d * 10 + (s[i] - '0');
      ++i;
    }
    dims.push_back(d);
    if (dims.size() > static_cast<size_t>(kMaxRank)) {
      return out_of_range(".npy header: rank exceeds " + std::to_string(kMaxRank));
    }
    skip_spaces();
    if (s[i] == ',') {
      ++i;
      skip_spaces();
    } else if (s[i] != ')') {
      return bad();
    }
  }
  if (i + 1 != s.size()) return bad();
  Shape shape(std::move(dims));
  RETURN_IF_ERROR(shape.validate());
  return shape;
}

}  // namespace

Result<Tensor> parse_npy(std::span<const uint8_t> bytes) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), kMagic, 6) != 0) {
    return invalid_argument("not a .npy file (bad magic)");
  }
  const int major = bytes[6];
  size_t header_len, header_start;
  if (major == 1) {
    header_len = bytes[8] | (static_cast<size_t>(bytes[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid_argument(".npy file truncated in its preamble");
    header_len = bytes[8] | (static_cast<size_t>(bytes[9]) << 8) |
                 (static_cast<size_t>(bytes[10]) << 16) | (static_cast<size_t>(bytes[11]) << 24);
    header_start = 12;
  } else {
    return unimplemented(".npy format version " + std::to_string(major) + " is not supported");
  }
  if (header_len > bytes.size() - header_start) {
    return invalid_argument(".npy header length " + std::to_string(header_len) +
                            " runs past the end of the file");
  }
  const std::string header(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);
  ASSIGN_OR_RETURN(NpyHeader parsed, parse_header(header));
  const std::string& descr = parsed.descr;
  const std::string& shape_text = parsed.shape;
  if (parsed.fortran != "False") {
    return unimplemented(".npy arrays in Fortran order are not supported");
  }
  ASSIGN_OR_RETURN(DType dtype, dtype_from_descr(descr));
  if (shape_text.empty() || shape_text[0] != '(') {
    return invalid_argument(".npy header: shape is not a tuple");
  }
  ASSIGN_OR_RETURN(Shape shape, parse_shape_tuple(shape_text));
  ASSIGN_OR_RETURN(uint64_t nbytes, checked_byte_size(shape, dtype));
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start != nbytes) {
    return invalid_argument(".npy data holds " + std::to_string(bytes.size() - data_start) +
                            " bytes, but " + dtype_name(dtype) + shape.to_string() + " needs " +
                            std::to_string(nbytes));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, shape));
  if (nbytes > 0) std::memcpy(t.raw(), bytes.data() + data_start, nbytes);
  return t;
}

Result<Tensor> read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open " + quote_name(path));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Result<Tensor> t = parse_npy(bytes);
  if (!t.ok()) return t.status().with_context(path);
  return t;
}

Status write_npy(const std::string& path, const Tensor& t) {
  std::string header =
      "{'descr': " + quote_name(npy_descr(t.dtype())) + ", 'fortran_order': False, 'shape': (";
  for (int i = 0; i < t.rank(); ++i) {
    header += std::to_string(t.dim(i));
    if (t.rank() == 1 || i + 1 < t.rank()) header += ",";
    if (i + 1 < t.rank()) header += " ";
  }
  header += "), }";
  // Pad so that the data starts at a multiple of 64 bytes; the header ends with '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return io_error("cannot write " + quote_name(path));
    f.write(kMagic, 6);
    const char version[2] = {1, 0};
    f.write(version, 2);
    const uint16_t len = static_cast<uint16_t>(header.size());
    const char lenb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    f.write(lenb, 2);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.byte_size()));
    if (!f) return io_error("write to " + quote_name(path) + " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return io_error("cannot rename onto " + quote_name(path));
  return Status();
}

}  // namespace tessera
