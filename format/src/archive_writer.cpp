// placeholder: implemented by the format work
