from .zygote import main
import sys

main(sys.argv[1:])
