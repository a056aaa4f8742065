"""Modified copies of the tiny GGUF models, for tests of what kiln does with unusual files."""
import gguf
import numpy as np


def write_variant(src, dst, arch=None, retype=None, chat_template=None):
    """Copies a GGUF file, optionally renaming its architecture, storing one tensor as IQ2_XS (a type kiln does not read), or
    replacing its tokenizer.chat_template ("" leaves the key out)."""
    r = gguf.GGUFReader(str(src))
    old_arch = str(bytes(r.fields["general.architecture"].parts[-1]), "utf-8")
    new_arch = arch or old_arch
    w = gguf.GGUFWriter(str(dst), new_arch)
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        if key == "tokenizer.chat_template" and chat_template is not None:
            continue
        vtype = field.types[0]
        new_key = key.replace(old_arch + ".", new_arch + ".", 1)
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                vals = [str(bytes(field.parts[i]), "utf-8") for i in field.data]
            else:
                vals = [field.parts[i][0].item() for i in field.data]
            w.add_array(new_key, vals)
        elif vtype == gguf.GGUFValueType.STRING:
            w.add_string(new_key, str(bytes(field.parts[-1]), "utf-8"))
        else:
            w.add_key_value(new_key, field.parts[-1][0].item(), vtype)
    if chat_template:
        w.add_string("tokenizer.chat_template", chat_template)
    for t in r.tensors:
        # Quantized data comes as bytes [rows, bytes per row]; the writer takes that shape.
        data = np.array(t.data)
        if retype and t.name == retype:
            rows, cols = int(t.shape[1]), int(t.shape[0])
            data = np.zeros((rows, cols // 256 * 74), dtype=np.uint8)
            w.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=gguf.GGMLQuantizationType.IQ2_XS)
        else:
            w.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
